import crypto from 'node:crypto';

/**
 * SHA-256 in one call: `crypto.hash` (Node ≥ 20.12) where there is one, without a Hash object
 * (a stream) per digest; `createHash` on older Node 20.
 */
const oneShotHash = (
  crypto as { hash?: (algorithm: string, data: string, encoding: 'hex' | 'buffer') => string | Buffer }
).hash;

/** SHA-256 (hex) of a text's UTF-8 bytes. */
export function sha256Hex(text: string): string {
  return oneShotHash
    ? (oneShotHash('sha256', text, 'hex') as string)
    : crypto.createHash('sha256').update(text, 'utf8').digest('hex');
}

/** SHA-256 (32 bytes) of a text's UTF-8 bytes. */
export function sha256Bytes(text: string): Buffer {
  return oneShotHash
    ? (oneShotHash('sha256', text, 'buffer') as Buffer)
    : crypto.createHash('sha256').update(text, 'utf8').digest();
}
