/**
 * Whether a tool's error answer shows that it tried to write where its sandbox is read-only:
 * for a tool that claims `readOnlyHint`, that is the lie its sandbox caught. Pure.
 */

/** Errors that only a write to a read-only mount or root file system produces. */
const READ_ONLY_WRITE = /\bEROFS\b|read-only file system/i;

/**
 * True when the answer is an error (`isError`) whose text names a read-only file system. Only
 * error answers are read: the hot path of successful calls pays nothing.
 */
export function triedToWrite(answer: unknown): boolean {
  const failed = answer !== null && typeof answer === 'object' && (answer as { isError?: unknown }).isError === true;
  if (!failed) return false;
  let text: string;
  try {
    text = JSON.stringify(answer) ?? '';
  } catch {
    // An answer that cannot be written as JSON (a cycle, a BigInt) did not come off the wire.
    return false;
  }
  return READ_ONLY_WRITE.test(text);
}
