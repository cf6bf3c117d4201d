/**
 * Text from a server, made safe to show a person or write to a log: control characters (which
 * could move the cursor, recolour a terminal or forge a line) become `?`. Tabs are kept.
 */
export function visibleText(text: string): string {
  let out = '';
  for (const ch of text) {
    const code = ch.codePointAt(0) ?? 0;
    out += (code < 0x20 && code !== 0x09) || (code >= 0x7f && code <= 0x9f) ? '?' : ch;
  }
  return out;
}
