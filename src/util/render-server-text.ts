/**
 * Text a server made (tool names, descriptions, `initialize` instructions, error messages,
 * preview output, stderr), rendered for a person: hintbox's one place for it, used by
 * confirmations, `hintbox approve`, `hintbox audit`, `hintbox plan` and the log. Pure.
 *
 * Everything that a terminal or a chat window would act on rather than show is written as an
 * escape (`\u001b`, `\u2028`, `\u{e0041}`), so that server text can neither move the cursor,
 * recolour or erase a terminal, start a line that passes for hintbox's own, nor reorder what a
 * reader sees:
 * - C0 and C1 control characters (ESC of ANSI sequences, CR, LF, NUL, NEL, DEL, …), tab apart;
 * - the line and paragraph separators U+2028 and U+2029;
 * - bidi controls: the embeddings and overrides U+202A–U+202E, the isolates U+2066–U+2069, and
 *   the marks U+200E, U+200F, U+061C;
 * - invisible characters that hide text from a reader: U+200B, U+2060–U+2064 and U+FEFF (not
 *   the joiners U+200C and U+200D, which scripts and emoji need), the interlinear annotations (U+FFF9–U+FFFB) and the tag characters
 *   (U+E0000–U+E007F, which spell out ASCII invisibly);
 * - lone surrogates.
 * A backslash is kept as it is: an escape the server wrote itself stays text, and cannot do
 * what the character it names would.
 */
export function renderServerText(text: string): string {
  // The common case, plain text, costs one scan and no copy.
  if (!NEEDS_ESCAPE.test(text)) return text;
  return text.replace(NEEDS_ESCAPE_ALL, escapeOne);
}

/**
 * Multi-line server text (a preview, instructions), one rendered line per line feed: a CR, a
 * U+2028 or anything else that could start a line is shown, never obeyed, so a caller that
 * prefixes each line (a fence) marks every line a reader sees.
 */
export function renderServerLines(text: string): string[] {
  return text.split('\n').map(renderServerText);
}

// With the `u` flag a surrogate pair is one code point, so the surrogate range matches only lone ones.
const CLASS =
  '[\\u0000-\\u0008\\u000a-\\u001f\\u007f-\\u009f\\u061c\\u200b\\u200e\\u200f\\u2028-\\u202e\\u2060-\\u2069' +
  '\\ufeff\\ufff9-\\ufffb\\ud800-\\udfff\\u{e0000}-\\u{e007f}]';
const NEEDS_ESCAPE = new RegExp(CLASS, 'u');
const NEEDS_ESCAPE_ALL = new RegExp(CLASS, 'gu');

/**
 * JSON text (a lock file) with the characters above that `JSON.stringify` leaves as they are
 * written as JSON escapes: it parses back to the same strings, but a reader of the file (a
 * `git diff` in review) sees them instead of having text reordered or hidden. C0 controls and
 * lone surrogates are escaped by `JSON.stringify` already (and the text's own line feeds are
 * its layout).
 */
export function escapeInvisibleInJson(json: string): string {
  // One code point per match; one above U+FFFF is written as its two UTF-16 units, as JSON wants.
  return json.replace(INVISIBLE_IN_JSON, (ch) =>
    Array.from({ length: ch.length }, (_, i) => `\\u${ch.charCodeAt(i).toString(16).padStart(4, '0')}`).join(''),
  );
}

const INVISIBLE_IN_JSON = new RegExp(
  '[\\u007f-\\u009f\\u061c\\u200b\\u200e\\u200f\\u2028-\\u202e\\u2060-\\u2069\\ufeff\\ufff9-\\ufffb\\u{e0000}-\\u{e007f}]',
  'gu',
);

function escapeOne(ch: string): string {
  const code = ch.codePointAt(0) ?? 0;
  return code > 0xffff ? `\\u{${code.toString(16)}}` : `\\u${code.toString(16).padStart(4, '0')}`;
}
