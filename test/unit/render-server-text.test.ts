import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { renderServerLines, renderServerText } from '../../src/util/render-server-text.js';

const ESC = '\u001b';

describe('renderServerText', () => {
  // proves: SERVER-TEXT
  it('shows every control, separator, bidi and invisible character as an escape, never raw', () => {
    const cases: [string, string][] = [
      ['\u0000', '\\u0000'],
      ['\r', '\\u000d'],
      ['\n', '\\u000a'],
      ['\u000b\u000c', '\\u000b\\u000c'],
      ['\u007f\u0085\u009b', '\\u007f\\u0085\\u009b'],
      ['\u2028', '\\u2028'],
      ['\u2029', '\\u2029'],
      ['\u202a\u202b\u202c\u202d\u202e', '\\u202a\\u202b\\u202c\\u202d\\u202e'],
      ['\u2066\u2067\u2068\u2069', '\\u2066\\u2067\\u2068\\u2069'],
      ['\u200e\u200f\u061c', '\\u200e\\u200f\\u061c'],
      ['\u200b\u2060\ufeff', '\\u200b\\u2060\\ufeff'],
      ['\u{e0041}\u{e007f}', '\\u{e0041}\\u{e007f}'],
      ['\ud800x\udc00', '\\ud800x\\udc00'],
    ];
    for (const [raw, shown] of cases) assert.equal(renderServerText(raw), shown, JSON.stringify(raw));
  });

  it('makes ANSI escape sequences inert: no ESC reaches the terminal', () => {
    const name = `wipe${ESC}[2K${ESC}[1A${ESC}]0;title\u0007${ESC}[31m`;
    const shown = renderServerText(name);
    assert.equal(shown, 'wipe\\u001b[2K\\u001b[1A\\u001b]0;title\\u0007\\u001b[31m');
    assert.doesNotMatch(shown, /[\u0000-\u001f]/); // eslint-disable-line no-control-regex
  });

  it('leaves plain text, tabs, other scripts, emoji and joiners as they are', () => {
    for (const text of ['read_file', 'a\tb', 'C:\\temp\\x', 'naïve — 東京 😀', '👨‍👩‍👧', 'می‌خواهم', '']) {
      assert.equal(renderServerText(text), text);
    }
  });

  it('a forged escape stays text: the backslash the server wrote is kept', () => {
    assert.equal(renderServerText('\\u001b[2K'), '\\u001b[2K');
  });
});

describe('renderServerLines', () => {
  it('splits only on line feeds, so every other line breaker is shown inside its line', () => {
    assert.deepEqual(renderServerLines('one\ntwo\u2028three\rfour\u2029five\n'), [
      'one',
      'two\\u2028three\\u000dfour\\u2029five',
      '',
    ]);
  });
});
