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
import type { CallPreviewer } from '../sandbox/preview.js';
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
  /** Who calls through this guard (a bearer token's name under `hintbox serve`); default null (stdio). */
  caller?: string | null;
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
      if (!client.canElicit()) {
        const how =
          this.trust === 'untrusted'
            ? 'Calls of an untrusted server always need a person: use a client that supports MCP elicitation, or mark the server trusted in its profile if you vouch for it.'
            : `To run it unattended, pre-approve it in the profile, e.g.\n  preApprove:\n    - tool: ${name}\n      arguments: { <name>: <regular expression> }   # or, for a path: { <name>: { under: <folder> } }`;
        return this.refuse(
          tool,
          args,
          trace,
          'denied',
          'no-elicitation',
          `hintbox denied ${name}: it needs a person's confirmation (${decision.reasons.join('; ')}), and this client cannot be asked (no MCP elicitation).\n${how}`,
        );
      }
      const event = {
        session: options.session,
        server: options.server,
        tool: name,
        ...(options.caller ? { caller: options.caller } : {}),
      };
      options.audit.recordEvent?.({ type: 'approval.asked', ...event, reasons: decision.reasons });
      const answer = await this.ask(tool, args, decision, client);
      options.audit.recordEvent?.({ type: 'approval.answered', ...event, answer });
      if (answer !== 'approved') {
        return this.refuse(
          tool,
          args,
          trace,
          'denied',
          answer === 'timeout' ? 'timeout' : 'person',
          answer === 'timeout'
            ? `hintbox denied ${name}: nobody answered the confirmation within ${Math.round(options.approvalTimeoutMs / 1000)} s`
            : `hintbox denied ${name}: the confirmation was declined`,
        );
      }
      decidedBy = 'person';
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

  private async ask(
    tool: GuardedTool,
    args: Record<string, unknown> | undefined,
    decision: ApprovalDecision,
    client: ClientChannel,
  ): Promise<'approved' | 'declined' | 'timeout'> {
    const { options } = this;
    // Every argument is shown; only long values are cut (unless the call may be irreversible).
    const shown = JSON.stringify(decision.showFullArguments ? (args ?? {}) : clipValues(args ?? {}), null, 2);
    const preview = await this.previewLines(tool, args);
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
      `Arguments${decision.showFullArguments ? ' (in full)' : ' (long values cut)'}:`,
      ...renderServerLines(shown),
      // Last, and fenced: the preview is the server's own output (file names, contents, errors),
      // so it must not be able to pass for hintbox's text above it.
      ...fence(preview),
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
      );
      return result.action === 'accept' && result.content?.approve === true ? 'approved' : 'declined';
    } catch (error) {
      const message = (error as Error).message;
      options.log.warn(`confirmation of ${tool.name} failed: ${message}`);
      return /timed? ?out/i.test(message) ? 'timeout' : 'declined';
    }
  }

  /** The preview section of a confirmation, or one line saying why there is none. Never throws. */
  private async previewLines(tool: GuardedTool, args: Record<string, unknown> | undefined): Promise<string[]> {
    const { previewer } = this.options;
    if (!previewer) {
      // Without a previewer (tests of the guard alone): say so, never imply a preview.
      return tool.effective.readOnlyHint ? [] : ['No preview of the effect of this call is available.'];
    }
    try {
      const preview = await previewer.preview(tool.sandbox, tool.name, args);
      if (preview.available) return [preview.text];
      const reason = preview.reason.charAt(0).toUpperCase() + preview.reason.slice(1);
      return [`${reason}.`];
    } catch (error) {
      return [`No preview: the dry run failed: ${(error as Error).message.split('\n')[0] ?? ''}.`];
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
