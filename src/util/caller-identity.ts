/**
 * Who a request of `hintbox serve` is: the subject its credentials name (a bearer token's name,
 * an OAuth token's `sub`) and the client they were issued to (OAuth's `client_id`, else `azp`),
 * kept as two fields. What belongs to a caller — its sessions, its session cap, the console's
 * one-time grants, its audit records — is keyed on the pair ({@link callerKey}), never on a text
 * that joins them: `alice (client ide)` could as well be someone's subject.
 */
export interface Caller {
  /** A bearer token's name, an OAuth token's `sub`. */
  readonly subject: string;
  /** The OAuth client the token was issued to; absent when the credentials name none (bearer tokens). */
  readonly client?: string;
}

/**
 * The key of a caller (null: nobody identified, as without credentials): one text per pair, and
 * two pairs never share one (each part is a JSON string, so no text of one part can pass for
 * the other's or for the seam between them).
 */
export function callerKey(caller: Caller | null | undefined): string {
  return caller ? JSON.stringify([caller.subject, caller.client ?? null]) : 'null';
}

/** Whether two requests are the same caller (both unidentified counts as the same). */
export function sameCaller(a: Caller | null | undefined, b: Caller | null | undefined): boolean {
  return callerKey(a) === callerKey(b);
}

/** A caller as a person reads it in logs and on pages — `alice (client ide)`. For reading only: never a key. */
export function callerText(caller: Caller | null | undefined): string {
  if (!caller) return 'nobody identified';
  return caller.client === undefined ? caller.subject : `${caller.subject} (client ${caller.client})`;
}

/** An audit record's fields for a caller: `caller` (the subject) and, when the credentials named one, `client`. */
export function callerFields(caller: Caller | null | undefined): { caller?: string; client?: string } {
  if (!caller) return {};
  return { caller: caller.subject, ...(caller.client !== undefined ? { client: caller.client } : {}) };
}
