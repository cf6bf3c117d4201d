import { triedToWrite } from '../policy/read-only-write.js';
import { networkRefusal } from '../policy/network-refusal.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { AuditDecider, AuditDecision, AuditLog, AuditOutcomeReport } from '../audit/audit-record.js';
import { errorResult } from '../mcp/json-rpc.js';
import { CallConfirmer, type CallConfirmerOptions } from '../confirmation/call-confirmer.js';
import type { InputRequiredAnswer } from '../confirmation/call-to-confirm.js';
import type { ClientChannel } from '../confirmation/client-channel.js';
import {
  decideApproval,
  type ApprovalDecision,
  type OperatorRule,
  type PinState,
  type ServerTrust,
} from '../policy/approval-decision.js';
import type { ClaimedHints, ToolHints } from '../policy/hints.js';
import { matchesPreApproval, type PreApproval } from '../policy/pre-approvals.js';
import { ServerTrustState } from '../policy/server-trust.js';
import { standingVerdict, type StandingAnswer } from '../policy/standing-answer.js';
import { changedFields, diffPins, type PinnedDefinition, type ToolPin } from '../policy/tool-pin.js';
import type { ToolTag } from '../policy/tool-tags.js';
import { renderServerText } from '../util/render-server-text.js';

export type { ClientChannel } from '../confirmation/client-channel.js';
export { compilePreApprovals, matchesPreApproval, type PreApproval } from '../policy/pre-approvals.js';

/**
 * Admission of a call, before it is forwarded: decide (pure, `decideApproval`: pre-approvals,
 * the approval policy, trust, pins, tags), have a person asked when the decision says so
 * (`CallConfirmer`), and write the audit intent. Nothing is forwarded unless its intent is
 * recorded: a store that fails means the call is refused (fail closed). The relays hold the
 * guard to admit calls, to know which tools the client sees, and to record outcomes.
 */

/** What the guard knows of one tool, fixed when the session plans it. */
export interface GuardedTool {
  name: string;
  sandbox: string;
  claimed: ClaimedHints;
  effective: ToolHints;
  /** The server sent no hints and the operator overrode none: the worst case. */
  annotationsMissing: boolean;
  enforced: boolean;
  /** Its sandbox has a network: a confirmation says data may leave the machine. */
  networked: boolean;
  tags: ToolTag[];
  pin: ToolPin;
  pinState: PinState;
  /** The approved definition when the pin changed (for the message naming what changed). */
  approvedDefinition?: PinnedDefinition;
  /** Why the approvals could not be read, when that is why the tool is blocked. */
  approvalsUnreadable?: string;
  rule?: OperatorRule;
}

/**
 * Whether a call may be forwarded: with its audit record, or with the error answer the client
 * gets — unless it is a 2026 client's call that needs a person: then it gets `inputRequired`.
 */
export type Admission =
  | { allowed: true; auditId: string; decision: ApprovalDecision }
  | { allowed: false; result: CallToolResult; inputRequired?: InputRequiredAnswer };

/** The confirmer's options (who, where, how long a person has, the console), and what admission needs. */
export interface CallGuardOptions extends Omit<CallConfirmerOptions, 'trust' | 'audit'> {
  /** The profile's trust, or the session's trust state (shared with the session). */
  trust: ServerTrust | ServerTrustState;
  tools: ReadonlyMap<string, GuardedTool>;
  preApprovals: readonly PreApproval[];
  audit: AuditLog;
  /** The profile file, for the `hintbox approve` command in messages. */
  profileFile: string;
  /**
   * The approved hash of a tool, read again (from the lock file) when a blocked tool is called:
   * a tool approved with `hintbox approve` while the session runs is served from then on, if
   * its definition is still the one approved. May throw (an unreadable lock file).
   */
  approvedHash?: (tool: string) => string | undefined;
  /**
   * The person's standing answer for a tool, read from the lock file when a call would be
   * confirmed (so a revocation holds from the next call). May throw (an unreadable lock file:
   * the person is asked).
   */
  standingAnswer?: (tool: string) => StandingAnswer | undefined;
  /** A blocked tool became approved (its visibility changed): tell the client its list changed. */
  onApproved?: (tool: string) => void;
  /** The server lost trust for the rest of the session (once): e.g. stop letting its sandboxes run free. */
  onUntrusted?: (reason: string) => void;
}

export class CallGuard {
  /** The server's trust in this session (lost when it is seen breaking a hint). */
  private readonly trustState: ServerTrustState;

  private tools: ReadonlyMap<string, GuardedTool>;

  /** Tools whose voided standing answer was audited in this session (once each). */
  private readonly voidedStanding = new Set<string>();

  /** Asks a person when the decision says so (the client's elicitation, the console). */
  private readonly confirmer: CallConfirmer;

  constructor(private readonly options: CallGuardOptions) {
    this.tools = options.tools;
    this.trustState = typeof options.trust === 'string' ? new ServerTrustState(options.trust) : options.trust;
    this.confirmer = new CallConfirmer({ ...options, trust: this.trustState });
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

  /** Why an answer is a refusal by its sandbox's lack of network (policy/network-refusal.ts), else undefined. */
  networkRefusalIn(name: string, answer: unknown): string | undefined {
    return networkRefusal(this.tools.get(name), answer);
  }

  /**
   * Reads a call's error answer for a lie its sandbox caught: a tool that claims `readOnlyHint`
   * and failed with `EROFS` tried to write. Returns the violation to record (and distrusts the
   * server), or undefined.
   */
  violationIn(name: string, answer: unknown): string | undefined {
    const tool = this.tools.get(name);
    if (!tool?.effective.readOnlyHint || !triedToWrite(answer)) return undefined;
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

  /** Whether `tools/list` shows the tool (tools blocked by their pin are hidden). */
  visible(tool: string): boolean {
    const t = this.tools.get(tool);
    if (!t) return false;
    return !(t.pinState === 'changed' || (t.pinState === 'unpinned' && this.trust === 'untrusted'));
  }

  /**
   * Why the client sees fewer tools than the server lists, for the client's `instructions`: a
   * client that gets an empty list is told what the person must do, not only hintbox's log.
   * Undefined when every tool is served.
   */
  hiddenToolsNote(): string | undefined {
    const hidden = [...this.tools.keys()].filter((name) => !this.visible(name));
    if (hidden.length === 0) return undefined;
    const shown = hidden.slice(0, 10).map(renderServerText).join(', ') + (hidden.length > 10 ? ', …' : '');
    return (
      `hintbox: ${hidden.length} of ${this.tools.size} tool(s) of ${this.options.server} are hidden until a person approves their definitions (${shown}). ` +
      `Tell the user to review and approve them in a terminal: hintbox approve ${this.options.profileFile} --all`
    );
  }

  /**
   * Whether the call may be forwarded, its intent recorded first. `trace`: the call's W3C
   * trace id (from its `_meta.traceparent`), recorded with its intent, and the traceparent
   * (the parent of the call's span, when tracing is on).
   */
  async admit(
    name: string,
    args: Record<string, unknown> | undefined,
    client: ClientChannel,
    trace: { traceId?: string; traceparent?: string } = {},
  ): Promise<Admission> {
    const { options } = this;
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
      if (this.approvedMeanwhile(tool)) return this.admit(name, args, client, trace);
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
    const standing = decision.action === 'confirm' ? this.standingFor(tool, args) : undefined;
    if (standing) decidedBy = 'standing';
    else if (decision.action === 'confirm') {
      const call = {
        tool: name,
        sandbox: tool.sandbox,
        tags: tool.tags,
        hints: tool.effective,
        pinHash: tool.pin.hash,
        arguments: args,
        decision,
        ...(tool.pinState === 'approved' && options.standingAnswer
          ? { standingCommand: `hintbox approve ${options.profileFile} --always ${name} [--under <arg>=<folder>]` }
          : {}),
      };
      const confirmed = await this.confirmer.confirm(call, client);
      // Asked of a 2026 client: nothing is decided (nor recorded as a call) until its retry.
      if ('inputRequired' in confirmed) {
        const asked = errorResult(`hintbox asked for a person's confirmation of ${name} (input_required)`);
        return { allowed: false, result: asked, inputRequired: confirmed.inputRequired };
      }
      if (!confirmed.allowed) return this.refuse(tool, args, trace, 'denied', confirmed.decidedBy, confirmed.text);
      decidedBy = confirmed.decidedBy;
    }

    try {
      const auditId = await this.record(tool, args, trace, 'allowed', decidedBy);
      if (decidedBy === 'pre-approval') options.log.info(`${name}: run under a pre-approval rule (audit ${auditId})`);
      if (standing) {
        options.log.info(`${name}: run on the standing answer given by ${standing.by} (audit ${auditId})`);
        options.audit.recordEvent?.({
          type: 'standing.used',
          session: options.session,
          server: options.server,
          tool: name,
          callId: auditId,
          pin: standing.sha256,
          givenBy: standing.by,
          givenAt: standing.at,
        });
      }
      return { allowed: true, auditId, decision };
    } catch (error) {
      options.log.error(`audit trail unavailable, refusing ${name}: ${(error as Error).message}`);
      return {
        allowed: false,
        result: errorResult(`hintbox refused ${name}: the audit trail cannot record it (${(error as Error).message})`),
      };
    }
  }

  /**
   * The person's standing answer that answers this call, if any. Only for a tool approved as it
   * is, without a profile rule that demands confirmation, of a server that broke no hint in this
   * session: a standing answer stands in for the person's yes, never for the operator's rule or
   * for what the session saw. One given for another definition is audited (once) and not used.
   */
  private standingFor(tool: GuardedTool, args: Record<string, unknown> | undefined): StandingAnswer | undefined {
    const { options } = this;
    if (!options.standingAnswer || tool.pinState !== 'approved' || tool.rule === 'confirm') return undefined;
    if (this.trustState.reason !== undefined) return undefined;
    let answer: StandingAnswer | undefined;
    try {
      answer = options.standingAnswer(tool.name);
    } catch (error) {
      options.log.warn(`could not read the standing answer of ${tool.name}: ${(error as Error).message}`);
      return undefined;
    }
    if (!answer) return undefined;
    const verdict = standingVerdict(answer, tool.pin.hash, args);
    if (verdict === 'voided' && !this.voidedStanding.has(tool.name)) {
      this.voidedStanding.add(tool.name);
      options.log.warn(`${tool.name}: its standing answer was given for another definition: a person is asked again`);
      options.audit.recordEvent?.({
        type: 'standing.voided',
        session: options.session,
        server: options.server,
        tool: tool.name,
        pin: tool.pin.hash,
        givenFor: answer.sha256,
      });
    }
    return verdict === 'applies' ? answer : undefined;
  }

  /** Records a call's outcome; never throws (failures are logged). */
  finish(auditId: string, report: AuditOutcomeReport): void {
    void this.options.audit.recordOutcome(auditId, report).catch((error: Error) => {
      this.options.log.error(`could not record the outcome of audit ${auditId}: ${error.message}`);
    });
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
