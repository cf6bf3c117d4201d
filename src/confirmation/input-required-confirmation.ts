import type { AuditLog } from '../audit/audit-record.js';
import { isObject } from '../mcp/json-rpc.js';
import { ownResult, type RoundTrip } from '../protocol/protocol-era.js';
import type { CallPreview } from '../sandbox/preview.js';
import { callerFields, callerKey, type Caller } from '../util/caller-identity.js';
import type { CallToConfirm, InputRequiredAnswer, RoundTripConfirmation } from './call-to-confirm.js';
import { ACCEPTED_UNTICKED, confirmationForm } from './confirmation-form.js';
import {
  mintRefusalText,
  refusalText,
  type CallBinding,
  type MintRefusal,
  type RequestStates,
  type StateRefusal,
} from './request-state.js';

/**
 * A confirmation asked of a 2026-era client (MCP 2026-07-28, multi-round-trip requests): the
 * call is not held. Its first request is answered `input_required` with the same form a 2025
 * client is shown (`confirmationForm`: the call, the reasons, the preview) and a signed
 * `requestState` bound to exactly that call (`request-state.ts`); the client retries the same
 * request with the person's answer and the state. The retry is decided afresh (policy, pins,
 * trust: the state never skips them), and its answer counts only when its state redeems for
 * this very call: a state altered, forged, expired, replayed or minted for another call is
 * refused, and the refusal recorded. One minted for this very call but another question (what the
 * person was shown changed: the server broke a hint since) is recorded and asked again.
 */

/** The key of hintbox's one question in `inputRequests` / `inputResponses`. */
export const CONFIRM_INPUT = 'hintbox.confirm';

export interface InputRequiredContext {
  server: string;
  session: string;
  caller: Caller | null;
  untrustedBecause: string | undefined;
  states: RequestStates;
  /** How long the person has to answer, in ms: the state expires then. */
  ttlMs: number;
  audit: Pick<AuditLog, 'recordEvent'>;
  preview: (call: CallToConfirm) => Promise<CallPreview>;
}

/** Whether a 2026 request is a retry: it carries a `requestState` or `inputResponses` (either is redeemed). */
export function isRetry(roundTrip: RoundTrip): boolean {
  return roundTrip.requestState !== undefined || roundTrip.inputResponses !== undefined;
}

/** Asks, or reads the answer of, the confirmation of `call` for a 2026 client's request. */
export async function confirmByRoundTrip(
  call: CallToConfirm,
  roundTrip: RoundTrip,
  context: InputRequiredContext,
): Promise<RoundTripConfirmation> {
  const binding: CallBinding = {
    caller: callerKey(context.caller),
    server: context.server,
    tool: call.tool,
    pinHash: call.pinHash,
    arguments: call.arguments,
    // What the person is shown beside the call: a change (a server that broke a hint since) is another question.
    question: {
      reasons: call.decision.reasons,
      warnings: call.decision.warnings,
      untrustedBecause: context.untrustedBecause ?? null,
    },
  };
  const event = {
    session: context.session,
    server: context.server,
    tool: call.tool,
    ...callerFields(context.caller),
  };
  const refuse = (reason: StateRefusal['reason'] | MintRefusal['reason'], why: string): RoundTripConfirmation => {
    context.audit.recordEvent?.({ type: 'approval.refused', ...event, reason, detail: why });
    return { allowed: false, decidedBy: 'request-state', text: `hintbox refused ${call.tool}: ${why}` };
  };
  if (isRetry(roundTrip)) {
    const refusal = context.states.redeem(roundTrip.requestState, binding);
    if (refusal) {
      const refused = refuse(refusal.reason, refusalText(refusal));
      // The very call asked about, but the person was shown another question: they answer this one.
      if (refusal.reason !== 'mismatch' || refusal.fields.some((f) => f !== 'question')) return refused;
    } else {
      const { answer, why } = answerOf(roundTrip.inputResponses);
      context.audit.recordEvent?.({ type: 'approval.answered', ...event, answer, by: 'client' });
      if (answer === 'approved') return { allowed: true, decidedBy: 'person' };
      return {
        allowed: false,
        decidedBy: 'person',
        text: `hintbox denied ${call.tool}: ${why ?? 'the confirmation was declined'}`,
      };
    }
  }
  const minted = context.states.tryMint(binding, context.ttlMs);
  if ('refused' in minted) return refuse(minted.refused.reason, mintRefusalText(minted.refused));
  const preview = await context.preview(call);
  const form = confirmationForm(call, {
    server: context.server,
    untrustedBecause: context.untrustedBecause,
    link: undefined,
    preview,
  });
  context.audit.recordEvent?.({ type: 'approval.asked', ...event, reasons: call.decision.reasons });
  const answer: InputRequiredAnswer = {
    resultType: 'input_required',
    inputRequests: { [CONFIRM_INPUT]: { method: 'elicitation/create', params: form } },
    requestState: minted.state,
  };
  return { allowed: false, inputRequired: ownResult(answer) };
}

/** The person's answer in the retry's `inputResponses`: only an accepted form with approve ticked is a yes. */
function answerOf(inputResponses: unknown): { answer: 'approved' | 'declined'; why?: string } {
  const response = isObject(inputResponses) ? inputResponses[CONFIRM_INPUT] : undefined;
  if (!isObject(response) || response.action !== 'accept') return { answer: 'declined' };
  const content = response.content;
  if (!isObject(content) || content.approve !== true) return { answer: 'declined', why: ACCEPTED_UNTICKED };
  return { answer: 'approved' };
}
