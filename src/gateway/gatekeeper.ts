import type {
  CallToolResult,
  ElicitRequestFormParams,
  ElicitRequestURLParams,
  ElicitResult,
} from '@modelcontextprotocol/sdk/types.js';
import type { AuditOutcomeReport } from '../audit/audit-record.js';
import type { ApprovalDecision, OperatorRule, PinState } from '../policy/approval-decision.js';
import type { ClaimedHints, ToolHints } from '../policy/hints.js';
import type { PinnedDefinition, ToolPin } from '../policy/tool-pin.js';
import type { ToolTag } from '../policy/tool-tags.js';

/**
 * What the call relay needs of the guard that admits calls (`CallGuard`: approval and the audit
 * intent), and what the guard knows of a tool.
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

/** How the guard reaches the person at the client. */
export interface ClientChannel {
  /** The client shows forms (form-mode elicitation). */
  canElicit(): boolean;
  elicit(params: ElicitRequestFormParams, timeoutMs: number, signal?: AbortSignal): Promise<ElicitResult>;
  /** The client can give the person a link to open (URL-mode elicitation). Default no. */
  canElicitUrl?(): boolean;
  elicitUrl?(params: ElicitRequestURLParams, timeoutMs: number, signal?: AbortSignal): Promise<ElicitResult>;
  /** Tells the client that the interaction behind a URL-mode elicitation is done. Never throws. */
  elicitationComplete?(elicitationId: string): void;
}

export type Admission =
  { allowed: true; auditId: string; decision: ApprovalDecision } | { allowed: false; result: CallToolResult };

/** The gateway's view of the guard (absent in tests of routing alone). */
export interface Gatekeeper {
  /** Whether `tools/list` shows the tool (tools blocked by their pin are hidden). */
  visible(tool: string): boolean;
  /** `traceId`: the call's W3C trace id (from its `_meta.traceparent`), recorded with its intent. */
  admit(
    tool: string,
    args: Record<string, unknown> | undefined,
    client: ClientChannel,
    traceId?: string,
  ): Promise<Admission>;
  /** Records a call's outcome; never throws (failures are logged). */
  finish(auditId: string, report: AuditOutcomeReport): void;
  /**
   * Reads a call's error answer for a lie its sandbox caught: a tool that claims `readOnlyHint`
   * and failed with `EROFS` tried to write. Returns the violation to record (and distrusts the server), or
   * undefined.
   */
  violationIn?(tool: string, answer: unknown): string | undefined;
}
