import type { ElicitRequestFormParams } from '@modelcontextprotocol/sdk/types.js';
import type { AuditDecider } from '../audit/audit-record.js';
import type { ApprovalDecision } from '../policy/approval-decision.js';
import type { ToolHints } from '../policy/hints.js';
import type { ToolTag } from '../policy/tool-tags.js';

/** One call the approval decision says a person must confirm, as the person is shown it. */
export interface CallToConfirm {
  tool: string;
  /** The sandbox class it would run in. */
  sandbox: string;
  tags: readonly ToolTag[];
  /** The tool's effective hints. */
  hints: ToolHints;
  /** The hash of the tool's pinned definition (an answer on the console is bound to it). */
  pinHash: string;
  arguments: Record<string, unknown> | undefined;
  /**
   * The command with which the person may give a standing answer for this tool, when it can
   * have one (an approved definition): offered in the question, never taken from an answer.
   */
  standingCommand?: string;
  /** Why a person is asked, and what they must be warned of. */
  decision: ApprovalDecision;
}

/**
 * What asking came to: the call may run (a person approved it, through the client or on the
 * console), or it is denied with the text the client is given and who decided, for the audit.
 */
export type Confirmation =
  { allowed: true; decidedBy: 'person' | 'console' } | { allowed: false; decidedBy: AuditDecider; text: string };

/** A confirmation of a 2026 client: also the `input_required` answer that asks it (not yet a decision). */
export type RoundTripConfirmation = Confirmation | { allowed: false; inputRequired: InputRequiredAnswer };

/** The `input_required` result of a confirmation (hintbox's own: its `resultType` is kept). */
export interface InputRequiredAnswer extends Record<string, unknown> {
  resultType: 'input_required';
  inputRequests: Record<string, { method: 'elicitation/create'; params: ElicitRequestFormParams }>;
  requestState: string;
}
