import { createHash } from 'node:crypto';

/** Text cut to a size, and what identifies the whole when it was cut. */
export interface CappedText {
  /** The text itself when it fits; else its longest prefix of whole characters that does. */
  kept: string;
  /** Present only when the text was cut: the whole's size and SHA-256, as UTF-8. */
  whole?: { bytes: number; sha256: string };
}

/**
 * Cuts `text` to at most `maxBytes` bytes of UTF-8, never inside a character, and keeps the
 * size and the SHA-256 (hex) of the whole UTF-8 text (lone surrogates count as U+FFFD, as UTF-8
 * writes them), so that a copy of the whole can still be matched to what was kept. Pure; costs a
 * hash only when it cuts.
 */
export function capText(text: string, maxBytes: number): CappedText {
  // Every UTF-16 unit is at most 3 bytes of UTF-8: short text needs no encoding at all.
  if (text.length * 3 <= maxBytes) return { kept: text };
  const utf8 = Buffer.from(text, 'utf8');
  if (utf8.length <= maxBytes) return { kept: text };
  let end = Math.max(0, maxBytes);
  // Back to the start of the character that straddles the limit (continuation bytes are 10xxxxxx).
  while (end > 0 && ((utf8[end] ?? 0) & 0xc0) === 0x80) end--;
  return { kept: utf8.subarray(0, end).toString('utf8'), whole: digestOf(utf8) };
}

/** The size and SHA-256 (hex) of a text as UTF-8. */
export function textDigest(text: string): { bytes: number; sha256: string } {
  return digestOf(Buffer.from(text, 'utf8'));
}

function digestOf(utf8: Buffer): { bytes: number; sha256: string } {
  return { bytes: utf8.length, sha256: createHash('sha256').update(utf8).digest('hex') };
}
