import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createLogger } from '../../src/util/logger.js';

const NOW = () => new Date('2026-12-01T06:00:00.000Z');

describe('the log', () => {
  it('writes text lines with the prefix, the level and server text rendered', () => {
    const lines: string[] = [];
    const log = createLogger('info', (l) => lines.push(l));
    log.debug('dropped');
    log.info('serving');
    log.child('fs/ro').warn('two\nlines \u001b[2J\u202e');
    assert.deepEqual(lines, [
      'hintbox: serving',
      'hintbox [fs/ro] warn: two',
      'hintbox [fs/ro] warn: lines \\u001b[2J\\u202e',
    ]);
  });

  it('writes one JSON object per message with time, level, component and msg', () => {
    const lines: string[] = [];
    const log = createLogger('info', (l) => lines.push(l), { format: 'json', now: NOW });
    log.debug('dropped');
    log.info('serving /mcp/fs');
    log.child('fs/ro').child('gate').error('failed');
    assert.deepEqual(
      lines.map((l) => JSON.parse(l) as unknown),
      [
        { time: '2026-12-01T06:00:00.000Z', level: 'info', component: 'hintbox', msg: 'serving /mcp/fs' },
        { time: '2026-12-01T06:00:00.000Z', level: 'error', component: 'fs/ro gate', msg: 'failed' },
      ],
    );
  });

  it("adds a message's fields after the four keys, never in their place; the text form leaves them out", () => {
    const json: string[] = [];
    const text: string[] = [];
    const fields = { server: 'fs', status: 403, msg: 'forged', level: 'debug' };
    createLogger('info', (l) => json.push(l), { format: 'json', now: NOW }).warn('denied', fields);
    createLogger('info', (l) => text.push(l)).warn('denied', fields);
    assert.deepEqual(json, [
      '{"time":"2026-12-01T06:00:00.000Z","level":"warn","component":"hintbox","msg":"denied","server":"fs","status":403}',
    ]);
    assert.deepEqual(text, ['hintbox warn: denied']);
  });

  // proves: SERVER-TEXT
  it('keeps server text in a JSON line from making lines, moving the cursor or reordering what is read', () => {
    const lines: string[] = [];
    const log = createLogger('info', (l) => lines.push(l), { format: 'json', now: NOW });
    const forged =
      'ok\n{"level":"info","msg":"forged"}\r\u001b[31mred\u009b2J\u202egnp.exe\u2028\u2066x\ufeff\u{e0041}';
    log.warn(`the server said: ${forged}`);
    assert.equal(lines.length, 1);
    const line = lines[0] as string;
    // Nothing a terminal acts on, nothing that breaks or reorders a line, is left as it is.
    // eslint-disable-next-line no-control-regex -- control characters are what is looked for
    assert.doesNotMatch(line, /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]|\u{e0041}/u);
    assert.equal(
      (JSON.parse(line) as { msg: string }).msg,
      `the server said: ${forged}`,
      'it parses back to the message',
    );
  });
});
