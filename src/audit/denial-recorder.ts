import { DenialBudget, type DenialBudgetOptions } from '../util/denial-budget.js';
import type { LogFields, Logger } from '../util/logger.js';
import type { AuditEvent } from './audit-record.js';
import { isoTime } from '../util/iso-time.js';

/**
 * Refusals a client can cause at will, before or without any session (a wrong token, a
 * forbidden Origin, a path it may not use), written down within a {@link DenialBudget} per
 * remote address and overall: the audit record and hintbox's log line of each refusal within
 * it; of the others a count, recorded as `denials.skipped` when the window closes (every
 * `windowMs`, and at {@link close}). Every refusal is counted (`countEvent`: metrics) whether
 * written down or not.
 */

/** One refusal. */
export interface DeniedRequest {
  /** Whom the budget is kept for (null: not known). */
  remoteAddress: string | null;
  /** Its audit record; none for a refusal that is only logged. */
  event?: AuditEvent;
  /** hintbox's log line (warn). */
  message: string;
  fields?: LogFields;
}

/** Where refusals go: {@link DenialRecorder}, or a test's list. */
export interface DenialSink {
  deny(denied: DeniedRequest): void;
}

export interface DenialRecorderOptions extends DenialBudgetOptions {
  audit: {
    recordEvent(event: AuditEvent): void;
    /** Counts a refusal not written down (metrics); optional. */
    countEvent?(event: AuditEvent): void;
  };
  log: Logger;
  /** How often what was left out is recorded, in ms. Default 60 000. */
  windowMs?: number;
}

export class DenialRecorder implements DenialSink {
  private readonly budget: DenialBudget;
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly options: DenialRecorderOptions) {
    this.budget = new DenialBudget(options);
    this.timer = setInterval(() => this.closeWindow(), options.windowMs ?? 60_000);
    this.timer.unref();
  }

  deny(denied: DeniedRequest): void {
    if (this.budget.take(denied.remoteAddress ?? 'unknown')) {
      this.options.log.warn(denied.message, denied.fields);
      if (denied.event) this.options.audit.recordEvent(denied.event);
    } else if (denied.event) this.options.audit.countEvent?.(denied.event);
  }

  /** Records what the last window left out, and stops. */
  close(): void {
    clearInterval(this.timer);
    this.closeWindow();
  }

  private closeWindow(): void {
    const window = this.budget.closeWindow();
    if (!window) return;
    const since = isoTime(window.since);
    const addresses = window.top.map(({ key, skipped }) => ({ address: key, skipped }));
    this.options.log.warn(
      `${window.skipped} refused request(s) since ${since} over the budget, counted but not written down one by one ` +
        `(most from ${addresses.map((a) => `${a.address} ${a.skipped}`).join(', ')})`,
    );
    this.options.audit.recordEvent({
      type: 'denials.skipped',
      session: null,
      server: null,
      since,
      skipped: window.skipped,
      addresses,
    });
  }
}
