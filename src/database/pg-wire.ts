/**
 * Pure framing of the PostgreSQL frontend/backend protocol (v3.x), only as far as the socket
 * relay needs it: the client's first packets (which carry no type byte) and the server's
 * message stream (type byte + int32 length). No sockets here; tests feed plain Buffers.
 */

/** The request codes a client may send before (or instead of) a StartupMessage. */
export const SSL_REQUEST_CODE = 80877103;
export const GSSENC_REQUEST_CODE = 80877104;
export const CANCEL_REQUEST_CODE = 80877102;

/** Postgres refuses startup packets longer than this (MAX_STARTUP_PACKET_LENGTH). */
export const MAX_STARTUP_PACKET_BYTES = 10_000;

/** SQLSTATEs that mean "the role was not allowed to do that": a hint was not true. */
export const INSUFFICIENT_PRIVILEGE = '42501';
export const READ_ONLY_SQL_TRANSACTION = '25006';

/** A client's first packet: no type byte, an int32 length (itself included), an int32 code. */
export type StartupPacket =
  | { kind: 'ssl-request' }
  | { kind: 'gssenc-request' }
  /** `keyData` is the backend pid followed by the secret key, as the server sent them in 'K'. */
  | { kind: 'cancel-request'; keyData: Buffer }
  | { kind: 'startup'; protocol: { major: number; minor: number }; parameters: Record<string, string> }
  | { kind: 'invalid'; reason: string };

/**
 * Reads one startup-phase packet from the start of `buffer`. Returns undefined while the packet
 * is incomplete; otherwise the packet and how many bytes it took (`invalid` takes them all).
 */
export function readStartupPacket(buffer: Buffer): { packet: StartupPacket; bytes: number } | undefined {
  if (buffer.length < 4) return undefined;
  const length = buffer.readInt32BE(0);
  if (length < 8 || length > MAX_STARTUP_PACKET_BYTES) {
    return { packet: { kind: 'invalid', reason: `startup packet length ${length}` }, bytes: buffer.length };
  }
  if (buffer.length < length) return undefined;
  const code = buffer.readInt32BE(4);
  const body = buffer.subarray(8, length);
  const done = (packet: StartupPacket) => ({ packet, bytes: length });
  if (code === SSL_REQUEST_CODE && length === 8) return done({ kind: 'ssl-request' });
  if (code === GSSENC_REQUEST_CODE && length === 8) return done({ kind: 'gssenc-request' });
  if (code === CANCEL_REQUEST_CODE) return done({ kind: 'cancel-request', keyData: Buffer.from(body) });
  const major = code >>> 16;
  if (major !== 3) return done({ kind: 'invalid', reason: `unsupported protocol code ${code}` });
  const parameters = parseStartupParameters(body);
  if (!parameters) return done({ kind: 'invalid', reason: 'malformed startup parameters' });
  return done({ kind: 'startup', protocol: { major, minor: code & 0xffff }, parameters });
}

/** `name\0value\0 … \0`. Undefined when the list is not properly terminated. */
function parseStartupParameters(body: Buffer): Record<string, string> | undefined {
  const parameters: Record<string, string> = {};
  let at = 0;
  for (;;) {
    if (at >= body.length) return undefined;
    if (body[at] === 0) return at === body.length - 1 ? parameters : undefined;
    const nameEnd = body.indexOf(0, at);
    if (nameEnd < 0) return undefined;
    const valueEnd = body.indexOf(0, nameEnd + 1);
    if (valueEnd < 0) return undefined;
    parameters[body.toString('utf8', at, nameEnd)] = body.toString('utf8', nameEnd + 1, valueEnd);
    at = valueEnd + 1;
  }
}

/** A CommandComplete's tag ('SELECT 2', 'LISTEN', …): its body, NUL-terminated. */
export function parseCommandTag(body: Buffer): string {
  const end = body.indexOf(0);
  return body.toString('utf8', 0, end < 0 ? body.length : end);
}

/** One message of the server's stream. `body` only for captured types. */
export interface BackendMessage {
  /** The type byte as a character ('E', 'K', 'Z', …); for an encryption answer 'S', 'N' or 'G'. */
  type: string;
  /** The length field (which counts itself, not the type byte); 0 for an encryption answer. */
  length: number;
  /** True for the one-byte answer to an SSLRequest or GSSENCRequest. */
  encryptionAnswer?: true;
  body?: Buffer;
  /** True when `body` holds only the first `maxCaptureBytes` of a longer body. */
  truncated?: true;
}

export interface BackendScannerOptions {
  /** Message types whose bodies are kept (others are skipped without buffering). Default E, K. */
  capture?: readonly string[];
  /** At most this many body bytes are kept per message. Default 64 KiB. */
  maxCaptureBytes?: number;
}

/**
 * Follows the server→client byte stream of one connection, whatever way it is split into
 * chunks, and reports each message. Bodies of uninteresting messages (rows can be 1 GB) are
 * never buffered. Once the stream stops making sense (a bad length, or encryption was
 * accepted), `stoppedBecause` says why and nothing more is reported: the relay keeps relaying,
 * it only stops watching.
 */
export class BackendMessageScanner {
  private readonly capture: ReadonlySet<string>;
  private readonly maxCapture: number;
  private readonly header = Buffer.alloc(5);
  private headerBytes = 0;
  private remaining = 0;
  private current: { type: string; length: number; chunks: Buffer[]; kept: number; truncated: boolean } | undefined;
  private answerExpected = false;
  private stopped: string | undefined;

  constructor(options: BackendScannerOptions = {}) {
    this.capture = new Set(options.capture ?? ['E', 'K']);
    this.maxCapture = options.maxCaptureBytes ?? 64 * 1024;
  }

  /** Why the scanner stopped following the stream, if it did. */
  get stoppedBecause(): string | undefined {
    return this.stopped;
  }

  /**
   * The client sent an SSLRequest or GSSENCRequest: the server's next byte is a bare answer
   * ('S'/'G': encryption follows, 'N': it does not), or an ErrorResponse from a very old server.
   */
  expectEncryptionAnswer(): void {
    this.answerExpected = true;
  }

  /** Feeds the next chunk; returns the messages that it completed. */
  push(chunk: Buffer): BackendMessage[] {
    const out: BackendMessage[] = [];
    let at = 0;
    while (at < chunk.length && !this.stopped) {
      if (this.current) {
        const take = Math.min(this.remaining, chunk.length - at);
        this.keep(chunk.subarray(at, at + take));
        at += take;
        this.remaining -= take;
        if (this.remaining === 0) out.push(this.finish());
        continue;
      }
      if (this.answerExpected && this.headerBytes === 0) {
        const type = String.fromCharCode(chunk[at]!);
        if (type !== 'E') {
          at += 1;
          this.answerExpected = false;
          out.push({ type, length: 0, encryptionAnswer: true });
          if (type === 'S' || type === 'G') this.stopped = 'the connection is encrypted';
          else if (type !== 'N') this.stopped = `unexpected answer ${JSON.stringify(type)} to an encryption request`;
          continue;
        }
        this.answerExpected = false;
      }
      const take = Math.min(5 - this.headerBytes, chunk.length - at);
      chunk.copy(this.header, this.headerBytes, at, at + take);
      this.headerBytes += take;
      at += take;
      if (this.headerBytes < 5) continue;
      this.headerBytes = 0;
      const type = String.fromCharCode(this.header[0]!);
      const length = this.header.readInt32BE(1);
      if (length < 4) {
        this.stopped = `message ${JSON.stringify(type)} has an invalid length ${length}`;
        continue;
      }
      this.current = { type, length, chunks: [], kept: 0, truncated: false };
      this.remaining = length - 4;
      if (this.remaining === 0) out.push(this.finish());
    }
    return out;
  }

  private keep(bytes: Buffer): void {
    const current = this.current!;
    if (!this.capture.has(current.type)) return;
    const room = this.maxCapture - current.kept;
    if (bytes.length > room) current.truncated = true;
    if (room <= 0) return;
    // Copy: the caller's chunk goes on to the client and may be reused.
    const kept = Buffer.from(bytes.subarray(0, room));
    current.chunks.push(kept);
    current.kept += kept.length;
  }

  private finish(): BackendMessage {
    const { type, length, chunks, truncated } = this.current!;
    this.current = undefined;
    const message: BackendMessage = { type, length };
    if (this.capture.has(type)) message.body = Buffer.concat(chunks);
    if (truncated) message.truncated = true;
    return message;
  }
}

/** An ErrorResponse or NoticeResponse, by its field codes (S, V, C, M, D, H, …). */
export interface PgErrorFields {
  /** Non-localized severity (V) where the server sends it, else the localized one (S). */
  severity: string;
  /** SQLSTATE (C). */
  sqlstate: string;
  /** Primary message (M). */
  message: string;
  /** Every field by its one-letter code. */
  fields: Record<string, string>;
}

/** Parses the body of an 'E' or 'N' message. A truncated body yields the complete fields. */
export function parseErrorFields(body: Buffer): PgErrorFields {
  const fields: Record<string, string> = {};
  let at = 0;
  while (at < body.length && body[at] !== 0) {
    const end = body.indexOf(0, at + 1);
    if (end < 0) break;
    fields[String.fromCharCode(body[at]!)] = body.toString('utf8', at + 1, end);
    at = end + 1;
  }
  return {
    severity: fields.V ?? fields.S ?? '',
    sqlstate: fields.C ?? '',
    message: fields.M ?? '',
    fields,
  };
}

/** Serializes an ErrorResponse ('E'), e.g. for the relay to refuse a connection itself. */
export function encodeErrorResponse(error: { severity: string; sqlstate: string; message: string }): Buffer {
  const parts: Buffer[] = [];
  for (const [code, value] of [
    ['S', error.severity],
    ['V', error.severity],
    ['C', error.sqlstate],
    ['M', error.message],
  ] as const) {
    parts.push(Buffer.from(code + value.replace(/\0/g, '') + '\0', 'utf8'));
  }
  parts.push(Buffer.from([0]));
  const body = Buffer.concat(parts);
  const header = Buffer.alloc(5);
  header.write('E', 0, 'latin1');
  header.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([header, body]);
}

/** A CancelRequest packet for the key data of a BackendKeyData ('K') message. */
export function encodeCancelRequest(keyData: Buffer): Buffer {
  const packet = Buffer.alloc(8 + keyData.length);
  packet.writeInt32BE(packet.length, 0);
  packet.writeInt32BE(CANCEL_REQUEST_CODE, 4);
  keyData.copy(packet, 8);
  return packet;
}
