import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  BackendMessageScanner,
  CANCEL_REQUEST_CODE,
  GSSENC_REQUEST_CODE,
  SSL_REQUEST_CODE,
  encodeCancelRequest,
  encodeErrorResponse,
  parseErrorFields,
  readStartupPacket,
  type BackendMessage,
  type BackendScannerOptions,
} from '../../src/database/pg-wire.js';
import { encodeStartupMessage } from '../support/pg-startup-message.js';

/** A backend message: type byte, int32 length (counting itself), body. */
function message(type: string, body: Buffer | string = Buffer.alloc(0)): Buffer {
  const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  const header = Buffer.alloc(5);
  header.write(type, 0, 'latin1');
  header.writeInt32BE(bytes.length + 4, 1);
  return Buffer.concat([header, bytes]);
}

function int32s(...values: number[]): Buffer {
  const b = Buffer.alloc(4 * values.length);
  values.forEach((v, i) => b.writeInt32BE(v, 4 * i));
  return b;
}

const PRIVILEGE_ERROR = encodeErrorResponse({
  severity: 'ERROR',
  sqlstate: '42501',
  message: 'permission denied for table items',
});
const READ_ONLY_ERROR = encodeErrorResponse({
  severity: 'ERROR',
  sqlstate: '25006',
  message: 'cannot execute INSERT in a read-only transaction',
});

/** What a real session's server side looks like: auth, parameters, key, a result, errors. */
const SESSION = Buffer.concat([
  message('R', int32s(0)),
  message('S', 'server_version\u000015.8\u0000'),
  message('K', int32s(4242, 0x5eed)),
  message('Z', 'I'),
  message('T', Buffer.alloc(30, 1)),
  message('D', Buffer.alloc(3000, 7)),
  message('C', 'SELECT 1\u0000'),
  message('Z', 'I'),
  PRIVILEGE_ERROR,
  message('Z', 'E'),
  message('N', 'SNOTICE\u0000C01007\u0000Mno privileges were granted\u0000\u0000'),
  READ_ONLY_ERROR,
  message('Z', 'I'),
]);

function scanAll(chunks: readonly Buffer[], options?: BackendScannerOptions): BackendMessage[] {
  const scanner = new BackendMessageScanner(options);
  const out = chunks.flatMap((c) => scanner.push(c));
  assert.equal(scanner.stoppedBecause, undefined, `the scanner kept up (${scanner.stoppedBecause})`);
  return out;
}

function summary(messages: readonly BackendMessage[]): string[] {
  return messages.map(
    (m) => `${m.type}:${m.length}${m.body ? `:${m.body.toString('hex')}` : ''}${m.truncated ? ':truncated' : ''}`,
  );
}

describe('BackendMessageScanner', () => {
  const whole = summary(scanAll([SESSION]));

  it('reports every message of a session, with bodies only for captured types', () => {
    assert.deepEqual(
      whole.map((s) => s.slice(0, 1)),
      ['R', 'S', 'K', 'Z', 'T', 'D', 'C', 'Z', 'E', 'Z', 'N', 'E', 'Z'],
    );
    const messages = scanAll([SESSION]);
    assert.equal(messages.find((m) => m.type === 'D')?.length, 3004);
    assert.equal(messages.find((m) => m.type === 'D')?.body, undefined, 'rows are not buffered');
    assert.deepEqual(messages.find((m) => m.type === 'K')?.body, int32s(4242, 0x5eed));
    const errors = messages.filter((m) => m.type === 'E').map((m) => parseErrorFields(m.body!).sqlstate);
    assert.deepEqual(errors, ['42501', '25006']);
  });

  it('gives the same messages however the stream is split in two, at every byte boundary', () => {
    for (let cut = 0; cut <= SESSION.length; cut++) {
      const parts = [SESSION.subarray(0, cut), SESSION.subarray(cut)];
      assert.deepEqual(summary(scanAll(parts)), whole, `split at byte ${cut}`);
    }
  });

  it('gives the same messages when fed one byte at a time', () => {
    const bytes = [...SESSION].map((b) => Buffer.from([b]));
    assert.deepEqual(summary(scanAll(bytes)), whole);
  });

  it('gives the same messages for three-way splits around the error messages', () => {
    const start = SESSION.indexOf(PRIVILEGE_ERROR);
    for (let a = start - 2; a < start + PRIVILEGE_ERROR.length + 2; a++) {
      for (let b = a; b < start + PRIVILEGE_ERROR.length + 8; b += 3) {
        const parts = [SESSION.subarray(0, a), SESSION.subarray(a, b), SESSION.subarray(b)];
        assert.deepEqual(summary(scanAll(parts)), whole, `split at ${a} and ${b}`);
      }
    }
  });

  it('keeps only the first maxCaptureBytes of a long body, and says so', () => {
    const long = message(
      'E',
      Buffer.concat([Buffer.from('C42501\u0000M'), Buffer.alloc(100, 0x61), Buffer.from([0, 0])]),
    );
    const [m] = scanAll([long.subarray(0, 20), long.subarray(20)], { maxCaptureBytes: 16 });
    assert.equal(m?.body?.length, 16);
    assert.equal(m?.truncated, true);
    assert.equal(parseErrorFields(m.body).sqlstate, '42501', 'complete fields of a truncated body still parse');
  });

  it('handles an empty body (length 4) at the end of a chunk', () => {
    const stream = Buffer.concat([message('1'), message('2'), message('Z', 'I')]);
    for (let cut = 0; cut <= stream.length; cut++) {
      const types = scanAll([stream.subarray(0, cut), stream.subarray(cut)]).map((m) => m.type);
      assert.deepEqual(types, ['1', '2', 'Z'], `split at ${cut}`);
    }
  });

  it("reads the single-byte 'N' answer to an SSLRequest, then the messages after it", () => {
    const stream = Buffer.concat([Buffer.from('N'), SESSION]);
    for (let cut = 0; cut <= 12; cut++) {
      const scanner = new BackendMessageScanner();
      scanner.expectEncryptionAnswer();
      const out = [stream.subarray(0, cut), stream.subarray(cut)].flatMap((c) => scanner.push(c));
      assert.deepEqual(out[0], { type: 'N', length: 0, encryptionAnswer: true }, `split at ${cut}`);
      assert.deepEqual(summary(out.slice(1)), whole, `split at ${cut}`);
    }
  });

  it("stops watching (and says why) once the server accepts encryption with 'S'", () => {
    const scanner = new BackendMessageScanner();
    scanner.expectEncryptionAnswer();
    const out = scanner.push(Buffer.concat([Buffer.from('S'), PRIVILEGE_ERROR]));
    assert.deepEqual(out, [{ type: 'S', length: 0, encryptionAnswer: true }]);
    assert.match(scanner.stoppedBecause ?? '', /encrypted/);
    assert.deepEqual(scanner.push(PRIVILEGE_ERROR), [], 'TLS bytes are not read as messages');
  });

  it('reads an ErrorResponse sent instead of an encryption answer as a message', () => {
    const scanner = new BackendMessageScanner();
    scanner.expectEncryptionAnswer();
    const out = scanner.push(PRIVILEGE_ERROR);
    assert.equal(out.length, 1);
    assert.equal(out[0]?.type, 'E');
    assert.equal(parseErrorFields(out[0].body!).sqlstate, '42501');
  });

  it('stops at a length below 4 instead of misreading the rest', () => {
    const scanner = new BackendMessageScanner();
    const bad = Buffer.concat([message('Z', 'I'), Buffer.from([0x45, 0, 0, 0, 2]), PRIVILEGE_ERROR]);
    assert.deepEqual(
      scanner.push(bad).map((m) => m.type),
      ['Z'],
    );
    assert.match(scanner.stoppedBecause ?? '', /invalid length 2/);
  });
});

describe('parseErrorFields', () => {
  it('reads severity, SQLSTATE and message, preferring the non-localized severity', () => {
    const body = Buffer.from('SFEHLER\u0000VERROR\u0000C42501\u0000Mpermission denied\u0000Hask\u0000\u0000');
    const parsed = parseErrorFields(body);
    assert.equal(parsed.severity, 'ERROR');
    assert.equal(parsed.sqlstate, '42501');
    assert.equal(parsed.message, 'permission denied');
    assert.equal(parsed.fields.H, 'ask');
  });

  it('round-trips encodeErrorResponse', () => {
    const scanner = new BackendMessageScanner();
    const [m] = scanner.push(encodeErrorResponse({ severity: 'FATAL', sqlstate: '28000', message: 'no' }));
    assert.deepEqual(parseErrorFields(m!.body!), {
      severity: 'FATAL',
      sqlstate: '28000',
      message: 'no',
      fields: { S: 'FATAL', V: 'FATAL', C: '28000', M: 'no' },
    });
  });
});

describe('readStartupPacket', () => {
  const startup = encodeStartupMessage({ user: 'hintbox_ab12_ro', database: 'app', application_name: 'x' });

  it('reads a StartupMessage with its parameters, only once it is complete', () => {
    for (let cut = 0; cut < startup.length; cut++) {
      assert.equal(readStartupPacket(startup.subarray(0, cut)), undefined, `incomplete at ${cut}`);
    }
    const read = readStartupPacket(Buffer.concat([startup, Buffer.from('Qmore')]));
    assert.deepEqual(read, {
      packet: {
        kind: 'startup',
        protocol: { major: 3, minor: 0 },
        parameters: { user: 'hintbox_ab12_ro', database: 'app', application_name: 'x' },
      },
      bytes: startup.length,
    });
  });

  it('recognizes SSLRequest, GSSENCRequest and CancelRequest', () => {
    assert.deepEqual(readStartupPacket(int32s(8, SSL_REQUEST_CODE)), { packet: { kind: 'ssl-request' }, bytes: 8 });
    assert.deepEqual(readStartupPacket(int32s(8, GSSENC_REQUEST_CODE)), {
      packet: { kind: 'gssenc-request' },
      bytes: 8,
    });
    const cancel = encodeCancelRequest(int32s(4242, 77));
    assert.deepEqual(cancel, int32s(16, CANCEL_REQUEST_CODE, 4242, 77));
    assert.deepEqual(readStartupPacket(cancel), {
      packet: { kind: 'cancel-request', keyData: int32s(4242, 77) },
      bytes: 16,
    });
  });

  it('accepts protocol 3.2 and refuses other major versions, bad lengths and unterminated parameters', () => {
    const v32 = Buffer.from(startup);
    v32.writeInt32BE((3 << 16) | 2, 4);
    assert.deepEqual((readStartupPacket(v32)?.packet as { protocol: unknown }).protocol, { major: 3, minor: 2 });

    const v2 = Buffer.from(startup);
    v2.writeInt32BE(2 << 16, 4);
    assert.equal(readStartupPacket(v2)?.packet.kind, 'invalid');
    assert.equal(readStartupPacket(int32s(4, 0))?.packet.kind, 'invalid');
    assert.equal(readStartupPacket(int32s(1_000_000, 0))?.packet.kind, 'invalid');
    const unterminated = Buffer.concat([int32s(13, 3 << 16), Buffer.from('user\u0000')]);
    assert.equal(readStartupPacket(unterminated)?.packet.kind, 'invalid');
  });
});
