import { callerFields, type Caller } from '../util/caller-identity.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import {
  APPROVAL_WARNING_TEXT,
  decideApproval,
  type ApprovalDecision,
  type ServerTrust,
} from '../policy/approval-decision.js';
import { matchesPreApproval, type PreApproval } from '../policy/pre-approvals.js';
import type { Admission, ClientChannel, Gatekeeper, GuardedTool } from './gatekeeper.js';
import { changedFields, diffPins } from '../policy/tool-pin.js';
import { ServerTrustState } from '../policy/server-trust.js';
import { formatTags } from '../policy/tool-tags.js';
import type { CallPreview, CallPreviewer } from '../sandbox/preview.js';
import type {
  ConsoleApprovals,
  ApprovalRequest,
  ConsoleAnswer,
  PendingApproval,
} from '../console/console-approvals.js';
import type { AuditDecider, AuditDecision, AuditLog, AuditOutcomeReport } from '../audit/audit-record.js';
import type { Logger } from '../util/logger.js';
import { renderServerLines, renderServerText } from '../util/render-server-text.js';

export type { Admission, ClientChannel, Gatekeeper, GuardedTool } from './gatekeeper.js';
export { compilePreApprovals, matchesPreApproval, type PreApproval } from '../policy/pre-approvals.js';

/**
 * Per call, before it is forwarded: decide (pure, `decideApproval`), ask a person through MCP
 * elicitation when the decision says so, and write the audit intent. Nothing is forwarded
 * unless its intent is recorded: a store that fails means the call is refused (fail closed).
 */

/**
 * How every confirmation hintbox asks for begins. A server's own elicitations are passed to the
 * client prefixed with the server's name; a profile may not take hintbox's (profile-schema.ts).
 */
export const CONFIRMATION_PREFIX = 'hintbox asks:';

/** Errors that only a write to a read-only mount or root file system produces. */
const READ_ONLY_WRITE = /\bEROFS\b|read-only file system/i;

export interface CallGuardOptions {
  server: string;
  session: string;
  /** Who calls through this guard under `hintbox serve` (subject and client); default null (stdio). */
  caller?: Caller | null;
  /** The profile's trust, or the session's trust state (shared with the session). */
  trust: ServerTrust | ServerTrustState;
  tools: ReadonlyMap<string, GuardedTool>;
  preApprovals: readonly PreApproval[];
  audit: AuditLog;
  /** How long a person has to answer, in ms; no answer is a denial. */
  approvalTimeoutMs: number;
  /** The profile file, for the `hintbox approve` command in messages. */
  profileFile: string;
  log: Logger;
  /**
   * Dry runs over copies of writable mounts, shown in confirmations. Only informs the person:
   * it never changes the decision, and its failure never blocks the call.
   */
  previewer?: CallPreviewer;
  /**
   * The approved hash of a tool, read again (from the lock file) when a blocked tool is called:
   * a tool approved with `hintbox approve` while the session runs is served from then on, if
   * its definition is still the one approved. May throw (an unreadable lock file).
   */
  approvedHash?: (tool: string) => string | undefined;
  /** A blocked tool became approved (its visibility changed): tell the client its list changed. */
  onApproved?: (tool: string) => void;
  /** The server lost trust for the rest of the session (once): e.g. stop letting its sandboxes run free. */
  onUntrusted?: (reason: string) => void;
  /**
   * hintbox's console (`--console`): every confirmation gets a page there too. A client with
   * URL-mode elicitation is sent its link; one with form elicitation the form with the link; one
   * with neither a denial carrying the link, and the same call repeated after the page approved
   * it runs once.
   */
  console?: Pick<ConsoleApprovals, 'open' | 'takeAnswer' | 'waitingFor'>;
  /** What the sandbox of a class may do, in a few words (for the console's page). */
  describeSandbox?: (sandbox: string) => string;
}

/** What a confirmation came to, and where the person answered. */
interface Answer {
  answer: ConsoleAnswer;
  by: 'client' | 'console';
}

export class CallGuard implements Gatekeeper {
  /** The server's trust in this session (lost when it is seen breaking a hint). */
  private readonly trustState: ServerTrustState;

  private tools: ReadonlyMap<string, GuardedTool>;

  constructor(private readonly options: CallGuardOptions) {
    this.tools = options.tools;
    this.trustState = typeof options.trust === 'string' ? new ServerTrustState(options.trust) : options.trust;
  }

  /** Why the server lost the operator's trust in this session (a hint it was seen to break). */
  private get untrustedBecause(): string | undefined {
    return this.trustState.reason;
  }

  /** The tools as the guard knows them now (their pins and whether they are approved). */
  get guardedTools(): ReadonlyMap<string, GuardedTool> {
    return this.tools;
  }

  /**
   * A tool was approved outside the session (the console wrote the lock file): served from now
   * on if the lock file holds its definition as it is. True when it became approved.
   */
  recheckApproval(name: string): boolean {
    const tool = this.tools.get(name);
    return tool !== undefined && tool.pinState !== 'approved' && this.approvedMeanwhile(tool);
  }

  /** The tools after a re-listing (new pins, new plan). */
  replaceTools(tools: ReadonlyMap<string, GuardedTool>): void {
    this.tools = tools;
  }

  /** The profile's trust, unless the server broke a hint in this session: then untrusted. */
  get trust(): ServerTrust {
    return this.trustState.current;
  }

  /**
   * From now on, for the rest of the session, the server is treated as untrusted whatever its
   * profile says: every call is confirmed, and tools never approved are blocked. Only adds
   * friction; there is no way back within the session.
   */
  markUntrusted(reason: string): void {
    if (!this.trustState.lose(reason)) return;
    if (this.trustState.configured === 'trusted') {
      this.options.log.warn(`${this.options.server} is treated as untrusted for the rest of this session: ${reason}`);
    }
    this.options.onUntrusted?.(reason);
  }

  violationIn(name: string, answer: unknown): string | undefined {
    const tool = this.tools.get(name);
    if (!tool?.effective.readOnlyHint) return undefined;
    // Only error answers are read: the hot path of successful calls pays nothing.
    const failed = answer !== null && typeof answer === 'object' && (answer as { isError?: unknown }).isError === true;
    if (!failed) return undefined;
    let text: string;
    try {
      text = JSON.stringify(answer) ?? '';
    } catch {
      return undefined;
    }
    if (!READ_ONLY_WRITE.test(text)) return undefined;
    const violation = 'readOnlyHint: the tool tried to write where its sandbox is read-only (EROFS)';
    this.options.log.warn(`hint violation: server ${this.options.server}, tool ${name}: ${violation}`);
    this.options.audit.recordEvent?.({
      type: 'hint.violation',
      session: this.options.session,
      server: this.options.server,
      tool: name,
      sandbox: tool.sandbox,
      violation,
    });
    this.markUntrusted(`${name} broke its readOnlyHint (it tried to write)`);
    return violation;
  }

  /**
   * Whether `hintbox approve` has approved exactly this definition since the session pinned it;
   * if so the tool counts as approved from now on. A lock file that cannot be read changes nothing.
   */
  private approvedMeanwhile(tool: GuardedTool): boolean {
    const { approvedHash, log, onApproved } = this.options;
    if (!approvedHash) return false;
    let approved: string | undefined;
    try {
      approved = approvedHash(tool.name);
    } catch (error) {
      log.warn(`could not read the approval of ${tool.name} again: ${(error as Error).message}`);
      return false;
    }
    if (approved !== tool.pin.hash || this.tools.get(tool.name) !== tool) return false;
    const now: GuardedTool = { ...tool, pinState: 'approved' };
    delete now.approvedDefinition;
    delete now.approvalsUnreadable;
    this.tools = new Map(this.tools).set(tool.name, now);
    log.info(`${tool.name} was approved (hintbox approve, lock file): served from now on`);
    onApproved?.(tool.name);
    return true;
  }

  visible(tool: string): boolean {
    const t = this.tools.get(tool);
    if (!t) return false;
    return !(t.pinState === 'changed' || (t.pinState === 'unpinned' && this.trust === 'untrusted'));
  }

  async admit(
    name: string,
    args: Record<string, unknown> | undefined,
    client: ClientChannel,
    traceId?: string,
  ): Promise<Admission> {
    const { options } = this;
    const trace = traceId === undefined ? {} : { traceId };
    const tool = this.tools.get(name);
    if (!tool) return { allowed: false, result: errorResult(`hintbox has no record of tool ${name}`) };
    const preApproved = options.preApprovals.some((rule) => matchesPreApproval(rule, name, args));
    const decision = decideApproval({
      hints: tool.effective,
      annotationsMissing: tool.annotationsMissing,
      trust: this.trust,
      pin: tool.pinState,
      enforced: tool.enforced,
      networked: tool.networked,
      rule: tool.rule,
      preApproved,
    });

    if (decision.action === 'blocked') {
      if (this.approvedMeanwhile(tool)) return this.admit(name, args, client, traceId);
      // The client reads which fields changed, never the new text (see hintbox approve for it).
      const changes = tool.approvedDefinition
        ? changedFields(diffPins(tool.approvedDefinition, tool.pin.definition)).map((c) => `- ${c}`)
        : [];
      const what = tool.approvalsUnreadable
        ? `the lock file of approvals cannot be read (${renderServerText(tool.approvalsUnreadable)}): every tool is refused until it reads again\nFix the lock file (or restore it from version control)`
        : changes.length
          ? `its definition changed since it was approved (what changed: ${changes.length === 1 ? 'this field' : 'these fields'}; "hintbox approve" shows the change):\n${changes.join('\n')}\nApprove it with: hintbox approve ${options.profileFile} ${name}`
          : `it has not been approved\nApprove it with: hintbox approve ${options.profileFile} ${name}`;
      return this.refuse(tool, args, trace, 'blocked', 'pin', `hintbox blocked ${name}: ${what}`);
    }
    if (decision.action === 'deny') {
      return this.refuse(tool, args, trace, 'denied', 'rule', `hintbox denied ${name}: ${decision.reasons.join('; ')}`);
    }

    let decidedBy: AuditDecider = decision.decidedBy === 'pin' ? 'auto' : decision.decidedBy;
    if (decision.action === 'confirm') {
      // A link is worth sending only when there is a page behind it (the console).
      const canAsk = client.canElicit() || (options.console !== undefined && client.canElicitUrl?.() === true);
      if (!canAsk && options.console) {
        const given = await this.consoleOnly(tool, args, decision);
        if (given.allowed === false) return this.refuse(tool, args, trace, 'denied', given.decidedBy, given.text);
      } else if (!canAsk) {
        const how =
          this.trust === 'untrusted'
            ? 'Calls of an untrusted server always need a person: use a client that supports MCP elicitation, start hintbox with --console (a page to answer on), or mark the server trusted in its profile if you vouch for it.'
            : `To run it unattended, pre-approve it in the profile, e.g.\n  preApprove:\n    - tool: ${name}\n      arguments: { <name>: <regular expression> }   # or, for a path: { <name>: { under: <folder> } }\nOr start hintbox with --console: a page where a person can answer.`;
        return this.refuse(
          tool,
          args,
          trace,
          'denied',
          'no-elicitation',
          `hintbox denied ${name}: it needs a person's confirmation (${decision.reasons.join('; ')}), and this client cannot be asked (no MCP elicitation).\n${how}`,
        );
      } else {
        const event = this.approvalEvent(name);
        const preview = await this.previewOf(tool, args);
        const pending = options.console?.open(
          this.consoleRequest(tool, args, decision, preview),
          'held',
          options.approvalTimeoutMs,
        );
        options.audit.recordEvent?.({
          type: 'approval.asked',
          ...event,
          reasons: decision.reasons,
          ...(pending ? { approval: pending.id } : {}),
        });
        const { answer, by } = await this.ask(tool, args, decision, client, preview, pending);
        options.audit.recordEvent?.({
          type: 'approval.answered',
          ...event,
          answer,
          by,
          ...(pending ? { approval: pending.id } : {}),
        });
        if (answer !== 'approved') {
          return this.refuse(
            tool,
            args,
            trace,
            'denied',
            answer === 'timeout' ? 'timeout' : by === 'console' ? 'console' : 'person',
            answer === 'timeout'
              ? `hintbox denied ${name}: nobody answered the confirmation within ${Math.round(options.approvalTimeoutMs / 1000)} s`
              : `hintbox denied ${name}: the confirmation was declined${by === 'console' ? " on hintbox's console" : ''}`,
          );
        }
        decidedBy = by === 'console' ? 'console' : 'person';
      }
      if (!canAsk) decidedBy = 'console';
    }

    try {
      const auditId = await this.record(tool, args, trace, 'allowed', decidedBy);
      if (decidedBy === 'pre-approval') options.log.info(`${name}: run under a pre-approval rule (audit ${auditId})`);
      return { allowed: true, auditId, decision };
    } catch (error) {
      options.log.error(`audit trail unavailable, refusing ${name}: ${(error as Error).message}`);
      return {
        allowed: false,
        result: errorResult(`hintbox refused ${name}: the audit trail cannot record it (${(error as Error).message})`),
      };
    }
  }

  finish(auditId: string, report: AuditOutcomeReport): void {
    void this.options.audit.recordOutcome(auditId, report).catch((error: Error) => {
      this.options.log.error(`could not record the outcome of audit ${auditId}: ${error.message}`);
    });
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
    tool: GuardedTool,
    args: Record<string, unknown> | undefined,
    decision: ApprovalDecision,
  ): Promise<{ allowed: true } | { allowed: false; decidedBy: AuditDecider; text: string }> {
    const { options } = this;
    const desk = options.console!;
    const call = {
      server: options.server,
      session: options.session,
      caller: options.caller ?? null,
      tool: tool.name,
      pinHash: tool.pin.hash,
      arguments: args ?? {},
    };
    const given = desk.takeAnswer(call);
    if (given?.answer === 'approved') {
      options.log.info(`${tool.name}: approved on the console (${given.id}): this call runs`);
      return { allowed: true };
    }
    if (given?.answer === 'declined') {
      return {
        allowed: false,
        decidedBy: 'console',
        text: `hintbox denied ${tool.name}: a person declined this call on hintbox's console`,
      };
    }
    let link = desk.waitingFor(call);
    if (link === undefined) {
      const preview = await this.previewOf(tool, args);
      const pending = desk.open(
        this.consoleRequest(tool, args, decision, preview),
        'repeat',
        options.approvalTimeoutMs,
      );
      link = pending.link;
      const event = { ...this.approvalEvent(tool.name), approval: pending.id };
      options.audit.recordEvent?.({ type: 'approval.asked', ...event, reasons: decision.reasons });
      void pending.answer.then((answer) =>
        options.audit.recordEvent?.({ type: 'approval.answered', ...event, answer, by: 'console' }),
      );
    }
    return {
      allowed: false,
      decidedBy: 'no-elicitation',
      text:
        `hintbox denied ${tool.name}: it needs a person's confirmation (${decision.reasons.join('; ')}), and this client cannot be asked (no MCP elicitation).\n` +
        `A person can review and answer it on hintbox's console: ${link}\n` +
        'Once it is approved there, make the same call again (the same arguments): it runs once.',
    };
  }

  /** What the console's page of this confirmation shows. */
  private consoleRequest(
    tool: GuardedTool,
    args: Record<string, unknown> | undefined,
    decision: ApprovalDecision,
    preview: CallPreview,
  ): ApprovalRequest {
    const { options } = this;
    return {
      server: options.server,
      session: options.session,
      caller: options.caller ?? null,
      tool: tool.name,
      tags: tool.tags.map((t) => formatTags([t])),
      sandbox: tool.sandbox,
      sandboxGrant: options.describeSandbox?.(tool.sandbox) ?? '',
      effectiveHints: tool.effective,
      warnings: decision.warnings.map((w) => APPROVAL_WARNING_TEXT[w]),
      reasons: decision.reasons,
      ...(this.untrustedBecause ? { untrustedBecause: this.untrustedBecause } : {}),
      arguments: args ?? {},
      pinHash: tool.pin.hash,
      preview,
    };
  }

  /**
   * Asks the person: through the client (URL mode: the console's link; form mode: the form,
   * with the link when there is a console) and on the console's page; the first answer wins, and
   * the other question is withdrawn.
   */
  private async ask(
    tool: GuardedTool,
    args: Record<string, unknown> | undefined,
    decision: ApprovalDecision,
    client: ClientChannel,
    preview: CallPreview,
    pending: PendingApproval | undefined,
  ): Promise<Answer> {
    const withdraw = new AbortController();
    const fromClient = (
      pending && client.canElicitUrl?.() && client.elicitUrl
        ? this.askByLink(tool, client, pending, withdraw.signal)
        : this.askByForm(tool, args, decision, client, preview, pending, withdraw.signal)
    ).then((answer): Answer => ({ answer, by: 'client' }));
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
    tool: GuardedTool,
    client: ClientChannel,
    pending: PendingApproval,
    signal: AbortSignal,
  ): Promise<ConsoleAnswer> {
    const { options } = this;
    try {
      const opened = await client.elicitUrl!(
        {
          mode: 'url',
          message: `${CONFIRMATION_PREFIX} allow ${options.server} to run ${renderServerText(tool.name)}? Review the call and answer on hintbox's console page.`,
          url: pending.link,
          elicitationId: pending.id,
        },
        options.approvalTimeoutMs,
        signal,
      );
      // Accepting a link only means the person opens it: the answer is given on the page.
      if (opened.action === 'accept') return await pending.answer;
      return 'declined';
    } catch (error) {
      return this.failedAnswer(tool, error as Error, signal);
    }
  }

  private async askByForm(
    tool: GuardedTool,
    args: Record<string, unknown> | undefined,
    decision: ApprovalDecision,
    client: ClientChannel,
    preview: CallPreview,
    pending: PendingApproval | undefined,
    signal: AbortSignal,
  ): Promise<ConsoleAnswer> {
    const { options } = this;
    // Every argument is shown; only long values are cut (unless the call may be irreversible).
    const shown = JSON.stringify(decision.showFullArguments ? (args ?? {}) : clipValues(args ?? {}), null, 2);
    // Names and tags are checked at discovery; rendered anyway, as everything a server or a
    // client made: no character of theirs may start a line or act on the reader's screen.
    // The first words say whose question this is: a server's own elicitations reach the client
    // too, under the server's name, and must never pass for hintbox's.
    const lines = [
      `${CONFIRMATION_PREFIX} allow ${options.server} to run ${renderServerText(tool.name)}${tool.tags.length ? ` [${renderServerText(formatTags(tool.tags))}]` : ''} (sandbox ${tool.sandbox})?`,
      ...decision.warnings.map((w) => `WARNING: ${APPROVAL_WARNING_TEXT[w]}`),
      ...(this.untrustedBecause
        ? [`WARNING: this server broke a hint earlier in this session: ${renderServerText(this.untrustedBecause)}`]
        : []),
      `Why you are asked: ${decision.reasons.join('; ')}.`,
      ...(pending ? [`The call and its preview, on a page where you may answer too: ${pending.link}`] : []),
      `Arguments${decision.showFullArguments ? ' (in full)' : ' (long values cut)'}:`,
      ...renderServerLines(shown),
      // Last, and fenced: the preview is the server's own output (file names, contents, errors),
      // so it must not be able to pass for hintbox's text above it.
      ...fence(previewText(preview)),
    ];
    try {
      const result = await client.elicit(
        {
          message: lines.join('\n'),
          requestedSchema: {
            type: 'object',
            properties: {
              approve: {
                type: 'boolean',
                title: `Run ${renderServerText(tool.name)}?`,
                description: 'true runs the call; false denies it',
              },
            },
            required: ['approve'],
          },
        },
        options.approvalTimeoutMs,
        signal,
      );
      return result.action === 'accept' && result.content?.approve === true ? 'approved' : 'declined';
    } catch (error) {
      return this.failedAnswer(tool, error as Error, signal);
    }
  }

  /**
   * A question to the client that failed: a timeout, else a decline. Withdrawn (the page was
   * answered first): never settles, the page's answer stands.
   */
  private failedAnswer(tool: GuardedTool, error: Error, signal: AbortSignal): Promise<ConsoleAnswer> {
    if (signal.aborted) return new Promise<never>(() => undefined);
    this.options.log.warn(`confirmation of ${tool.name} failed: ${error.message}`);
    return Promise.resolve(/timed? ?out/i.test(error.message) ? 'timeout' : 'declined');
  }

  /** The dry run's changes, or why there are none. Never throws. */
  private async previewOf(tool: GuardedTool, args: Record<string, unknown> | undefined): Promise<CallPreview> {
    const { previewer } = this.options;
    if (!previewer) {
      // Without a previewer (tests of the guard alone): say so, never imply a preview.
      return {
        available: false,
        reason: tool.effective.readOnlyHint ? '' : 'no preview of the effect of this call is available',
      };
    }
    try {
      return await previewer.preview(tool.sandbox, tool.name, args);
    } catch (error) {
      return {
        available: false,
        reason: `no preview: the dry run failed: ${(error as Error).message.split('\n')[0] ?? ''}`,
      };
    }
  }

  private async refuse(
    tool: GuardedTool,
    args: Record<string, unknown> | undefined,
    trace: { traceId?: string },
    decision: AuditDecision,
    decidedBy: AuditDecider,
    text: string,
  ): Promise<Admission> {
    try {
      const id = await this.record(tool, args, trace, decision, decidedBy);
      this.finish(id, { outcome: 'not-run', detail: text.split('\n')[0] ?? text });
    } catch (error) {
      this.options.log.error(`could not record the refusal of ${tool.name}: ${(error as Error).message}`);
    }
    this.options.log.info(text.split('\n')[0] ?? text);
    return { allowed: false, result: errorResult(text) };
  }

  private record(
    tool: GuardedTool,
    args: Record<string, unknown> | undefined,
    trace: { traceId?: string },
    decision: AuditDecision,
    decidedBy: AuditDecider,
  ): Promise<string> {
    const { options } = this;
    return options.audit.recordIntent({
      session: options.session,
      server: options.server,
      tool: tool.name,
      tags: tool.tags,
      claimedHints: tool.claimed,
      effectiveHints: tool.effective,
      sandbox: tool.sandbox,
      decision,
      decidedBy,
      arguments: args ?? {},
      pinHash: tool.pin.hash,
      ...trace,
      caller: options.caller ?? null,
    });
  }
}

/** The preview section of a form's text: the dry run's changes, or one line saying why there are none. */
function previewText(preview: CallPreview): string[] {
  if (preview.available) return [preview.text];
  if (preview.reason === '') return [];
  return [`${preview.reason.charAt(0).toUpperCase()}${preview.reason.slice(1)}.`];
}

/** Top-level argument values longer than this are cut in confirmations that may cut. */
const MAX_SHOWN_VALUE = 500;

function clipValues(args: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(args).map(([key, value]) => {
      const text = typeof value === 'string' ? value : JSON.stringify(value);
      if (text === undefined || text.length <= MAX_SHOWN_VALUE) return [key, value];
      return [key, `${text.slice(0, MAX_SHOWN_VALUE)}… (${text.length} characters; cut)`];
    }),
  );
}

/**
 * Marks every line of server-made text, rendered (`renderServerText`): a line separator, a CR or
 * an escape sequence in it is shown, so nothing of it can start a line without the mark.
 */
function fence(lines: readonly string[]): string[] {
  return lines.flatMap(renderServerLines).map((l, i) => (i === 0 ? '' : '│ ') + l);
}

function errorResult(text: string): CallToolResult {
  return { isError: true, content: [{ type: 'text', text }] };
}
