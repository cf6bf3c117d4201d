import type { AuditLog } from '../audit/audit-record.js';
import type {
  ApprovalRequest,
  ConsoleAnswer,
  ConsoleApprovals,
  PendingApproval,
} from '../console/console-approvals.js';
import { APPROVAL_WARNING_TEXT } from '../policy/approval-decision.js';
import type { ServerTrustState } from '../policy/server-trust.js';
import { formatTags } from '../policy/tool-tags.js';
import type { CallPreview, CallPreviewer } from '../sandbox/preview.js';
import { callerFields, type Caller } from '../util/caller-identity.js';
import type { Logger } from '../util/logger.js';
import type { CallToConfirm, Confirmation, RoundTripConfirmation } from './call-to-confirm.js';
import type { ClientChannel } from './client-channel.js';
import { ACCEPTED_UNTICKED, confirmationForm, linkQuestion } from './confirmation-form.js';
import { confirmByRoundTrip, isRetry } from './input-required-confirmation.js';
import { processRequestStates, type RequestStates } from './request-state.js';

/**
 * Asking a person whether a call may run, once the approval decision says a person must: through
 * the client (a form, or the console's link) and on hintbox's console, whichever answers first;
 * or, for a client that can be asked nothing, on the console alone (the call is denied with the
 * page's link and runs once when repeated after an approval there). Every question and answer
 * is recorded as an audit event; the call's own record is the guard's (`CallGuard`).
 */

export interface CallConfirmerOptions {
  server: string;
  session: string;
  /** Who calls under `hintbox serve` (subject and client); default null (stdio). */
  caller?: Caller | null;
  /** The server's trust in this session (a server that broke a hint is named on every question). */
  trust: ServerTrustState;
  /** Where the questions and answers are recorded (`approval.asked`, `approval.answered`). */
  audit: Pick<AuditLog, 'recordEvent'>;
  /** How long a person has to answer, in ms; no answer is a denial. */
  approvalTimeoutMs: number;
  log: Logger;
  /**
   * Dry runs over copies of writable mounts, shown in confirmations. Only informs the person:
   * it never changes the decision, and its failure never blocks the call.
   */
  previewer?: CallPreviewer;
  /**
   * hintbox's console (`--console`): every confirmation gets a page there too. A client with
   * URL-mode elicitation is sent its link; one with form elicitation the form with the link; one
   * with neither a denial carrying the link, and the same call repeated after the page approved
   * it runs once.
   */
  console?: Pick<ConsoleApprovals, 'open' | 'takeAnswer' | 'waitingFor'>;
  /** What the sandbox of a class may do, in a few words (for the console's page). */
  describeSandbox?: (sandbox: string) => string;
  /** Signs and redeems the `requestState` of confirmations asked of 2026 clients. Default: this process's. */
  requestStates?: RequestStates;
}

/** What a question came to, and where the person answered. */
interface Answer {
  answer: ConsoleAnswer;
  by: 'client' | 'console';
  /** Why a declined answer is one, when the person may not know (a form accepted unticked). */
  why?: string;
}

export class CallConfirmer {
  constructor(private readonly options: CallConfirmerOptions) {}

  /**
   * Asks a person about `call` (never throws): whether it may run, or why it is denied; or, for
   * a 2026 client that can show a form, the `input_required` answer that asks (or the answer
   * its retry carried).
   */
  async confirm(call: CallToConfirm, client: ClientChannel): Promise<RoundTripConfirmation> {
    const { console } = this.options;
    const { roundTrip } = client;
    // A retry's state is redeemed whatever its envelope declares: dropping elicitation from the
    // capabilities must not turn a forged state into one nobody checks (nor audits).
    if (roundTrip && (roundTrip.canElicit || isRetry(roundTrip))) {
      const { options } = this;
      return confirmByRoundTrip(call, roundTrip, {
        server: options.server,
        session: options.session,
        caller: options.caller ?? null,
        untrustedBecause: options.trust.reason,
        states: options.requestStates ?? processRequestStates,
        ttlMs: options.approvalTimeoutMs,
        audit: options.audit,
        preview: (c) => this.previewOf(c),
      });
    }
    // A link is worth sending only when there is a page behind it (the console).
    const canAsk = client.canElicit() || (console !== undefined && client.canElicitUrl?.() === true);
    if (canAsk) return this.askHeld(call, client);
    if (console) return this.consoleOnly(call, console);
    const how =
      this.options.trust.current === 'untrusted'
        ? 'Calls of an untrusted server always need a person: use a client that supports MCP elicitation, start hintbox with --console (a page to answer on), or mark the server trusted in its profile if you vouch for it.'
        : `To run it unattended, pre-approve it in the profile, e.g.\n  preApprove:\n    - tool: ${call.tool}\n      arguments: { <name>: <regular expression> }   # or, for a path: { <name>: { under: <folder> } }\nOr start hintbox with --console: a page where a person can answer.`;
    return {
      allowed: false,
      decidedBy: 'no-elicitation',
      text: `hintbox denied ${call.tool}: it needs a person's confirmation (${call.decision.reasons.join('; ')}), and this client cannot be asked (no MCP elicitation).\n${how}`,
    };
  }

  /** The call is held while the person is asked, through the client and on the console's page if there is one. */
  private async askHeld(call: CallToConfirm, client: ClientChannel): Promise<Confirmation> {
    const { options } = this;
    const event = this.approvalEvent(call.tool);
    const preview = await this.previewOf(call);
    const pending = options.console?.open(this.consoleRequest(call, preview), 'held', options.approvalTimeoutMs);
    options.audit.recordEvent?.({
      type: 'approval.asked',
      ...event,
      reasons: call.decision.reasons,
      ...(pending ? { approval: pending.id } : {}),
    });
    const { answer, by, why } = await this.ask(call, client, preview, pending);
    options.audit.recordEvent?.({
      type: 'approval.answered',
      ...event,
      answer,
      by,
      ...(pending ? { approval: pending.id } : {}),
    });
    if (answer === 'approved') return { allowed: true, decidedBy: by === 'console' ? 'console' : 'person' };
    return {
      allowed: false,
      decidedBy: answer === 'timeout' ? 'timeout' : by === 'console' ? 'console' : 'person',
      text:
        answer === 'timeout'
          ? `hintbox denied ${call.tool}: nobody answered the confirmation within ${Math.round(options.approvalTimeoutMs / 1000)} s`
          : `hintbox denied ${call.tool}: ${why ?? `the confirmation was declined${by === 'console' ? " on hintbox's console" : ''}`}`,
    };
  }

  private approvalEvent(tool: string): {
    session: string;
    server: string;
    tool: string;
    caller?: string;
    client?: string;
  } {
    const { options } = this;
    return {
      session: options.session,
      server: options.server,
      tool,
      ...callerFields(options.caller),
    };
  }

  /**
   * A client that can be asked nothing, with the console on: the person's answer on the page to
   * this very call (used once), else a denial whose text carries the page's link.
   */
  private async consoleOnly(
    call: CallToConfirm,
    approvals: NonNullable<CallConfirmerOptions['console']>,
  ): Promise<Confirmation> {
    const { options } = this;
    const asked = {
      server: options.server,
      session: options.session,
      caller: options.caller ?? null,
      tool: call.tool,
      pinHash: call.pinHash,
      arguments: call.arguments ?? {},
    };
    const given = approvals.takeAnswer(asked);
    if (given?.answer === 'approved') {
      options.log.info(`${call.tool}: approved on the console (${given.id}): this call runs`);
      return { allowed: true, decidedBy: 'console' };
    }
    if (given?.answer === 'declined') {
      return {
        allowed: false,
        decidedBy: 'console',
        text: `hintbox denied ${call.tool}: a person declined this call on hintbox's console`,
      };
    }
    let link = approvals.waitingFor(asked);
    if (link === undefined) {
      const preview = await this.previewOf(call);
      const pending = approvals.open(this.consoleRequest(call, preview), 'repeat', options.approvalTimeoutMs);
      link = pending.link;
      const event = { ...this.approvalEvent(call.tool), approval: pending.id };
      options.audit.recordEvent?.({ type: 'approval.asked', ...event, reasons: call.decision.reasons });
      void pending.answer.then((answer) =>
        options.audit.recordEvent?.({ type: 'approval.answered', ...event, answer, by: 'console' }),
      );
    }
    return {
      allowed: false,
      decidedBy: 'no-elicitation',
      text:
        `hintbox denied ${call.tool}: it needs a person's confirmation (${call.decision.reasons.join('; ')}), and this client cannot be asked (no MCP elicitation).\n` +
        `A person can review and answer it on hintbox's console: ${link}\n` +
        'Once it is approved there, make the same call again (the same arguments): it runs once.',
    };
  }

  /** What the console's page of this confirmation shows. */
  private consoleRequest(call: CallToConfirm, preview: CallPreview): ApprovalRequest {
    const { options } = this;
    const untrustedBecause = options.trust.reason;
    return {
      server: options.server,
      session: options.session,
      caller: options.caller ?? null,
      tool: call.tool,
      tags: call.tags.map((t) => formatTags([t])),
      sandbox: call.sandbox,
      sandboxGrant: options.describeSandbox?.(call.sandbox) ?? '',
      effectiveHints: call.hints,
      warnings: call.decision.warnings.map((w) => APPROVAL_WARNING_TEXT[w]),
      reasons: call.decision.reasons,
      ...(untrustedBecause ? { untrustedBecause } : {}),
      arguments: call.arguments ?? {},
      pinHash: call.pinHash,
      preview,
    };
  }

  /**
   * Asks the person: through the client (URL mode: the console's link; form mode: the form,
   * with the link when there is a console) and on the console's page; the first answer wins, and
   * the other question is withdrawn.
   */
  private async ask(
    call: CallToConfirm,
    client: ClientChannel,
    preview: CallPreview,
    pending: PendingApproval | undefined,
  ): Promise<Answer> {
    const withdraw = new AbortController();
    const fromClient: Promise<Answer> =
      pending && client.canElicitUrl?.() && client.elicitUrl
        ? this.askByLink(call, client, pending, withdraw.signal).then((answer) => ({ answer, by: 'client' }))
        : this.askByForm(call, client, preview, pending, withdraw.signal);
    const onPage = pending
      ? pending.answer.then((answer): Answer | Promise<never> =>
          answer === 'approved' || answer === 'declined'
            ? { answer, by: 'console' }
            : new Promise<never>(() => undefined),
        )
      : new Promise<never>(() => undefined);
    const first = await Promise.race([fromClient, onPage]);
    if (first.by === 'console') {
      withdraw.abort(new Error('answered on the console'));
      if (pending && client.canElicitUrl?.()) client.elicitationComplete?.(pending.id);
    } else {
      pending?.withdraw(first.answer === 'timeout' ? 'not answered in time' : 'answered through the client');
    }
    return first;
  }

  /** URL mode: the client gives the person the page's link; the answer is the page's. */
  private async askByLink(
    call: CallToConfirm,
    client: ClientChannel,
    pending: PendingApproval,
    signal: AbortSignal,
  ): Promise<ConsoleAnswer> {
    const { options } = this;
    try {
      const opened = await client.elicitUrl!(
        linkQuestion(options.server, call.tool, pending),
        options.approvalTimeoutMs,
        signal,
      );
      // Accepting a link only means the person opens it: the answer is given on the page.
      if (opened.action === 'accept') return await pending.answer;
      return 'declined';
    } catch (error) {
      return this.failedAnswer(call, error as Error, signal);
    }
  }

  private async askByForm(
    call: CallToConfirm,
    client: ClientChannel,
    preview: CallPreview,
    pending: PendingApproval | undefined,
    signal: AbortSignal,
  ): Promise<Answer> {
    const { options } = this;
    const form = confirmationForm(call, {
      server: options.server,
      untrustedBecause: options.trust.reason,
      link: pending?.link,
      preview,
    });
    try {
      const result = await client.elicit(form, options.approvalTimeoutMs, signal);
      if (result.action !== 'accept') return { answer: 'declined', by: 'client' };
      // Only a ticked box is a yes: a form accepted as it was shown denies the call, saying why.
      if (result.content?.approve !== true) return { answer: 'declined', by: 'client', why: ACCEPTED_UNTICKED };
      return { answer: 'approved', by: 'client' };
    } catch (error) {
      return { answer: await this.failedAnswer(call, error as Error, signal), by: 'client' };
    }
  }

  /**
   * A question to the client that failed: a timeout, else a decline. Withdrawn (the page was
   * answered first): never settles, the page's answer stands.
   */
  private failedAnswer(call: CallToConfirm, error: Error, signal: AbortSignal): Promise<ConsoleAnswer> {
    if (signal.aborted) return new Promise<never>(() => undefined);
    this.options.log.warn(`confirmation of ${call.tool} failed: ${error.message}`);
    return Promise.resolve(/timed? ?out/i.test(error.message) ? 'timeout' : 'declined');
  }

  /** The dry run's changes, or why there are none. Never throws. */
  private async previewOf(call: CallToConfirm): Promise<CallPreview> {
    const { previewer } = this.options;
    if (!previewer) {
      // Without a previewer (tests of the guard alone): say so, never imply a preview.
      return {
        available: false,
        reason: call.hints.readOnlyHint ? '' : 'no preview of the effect of this call is available',
      };
    }
    try {
      return await previewer.preview(call.sandbox, call.tool, call.arguments);
    } catch (error) {
      return {
        available: false,
        reason: `no preview: the dry run failed: ${(error as Error).message.split('\n')[0] ?? ''}`,
      };
    }
  }
}
