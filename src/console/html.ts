import { renderServerText } from '../util/render-server-text.js';

/**
 * HTML made safely: every value interpolated into an `html` template is text — rendered first
 * (`renderServerText`: control characters, line separators, bidi overrides and invisible
 * characters become visible escapes) and then escaped for HTML — unless it is itself `html`
 * made. Attribute values must be quoted in the template (`href="${url}"`). Pure.
 */

const MADE = Symbol('html');

export interface Html {
  readonly [MADE]: true;
  readonly text: string;
}

type Value = string | number | boolean | null | undefined | Html | readonly Value[];

export function html(strings: TemplateStringsArray, ...values: Value[]): Html {
  let text = strings[0] ?? '';
  values.forEach((value, i) => {
    text += piece(value) + (strings[i + 1] ?? '');
  });
  return { [MADE]: true, text };
}

/** Multi-line text (arguments, a preview): each line rendered; line feeds kept as line feeds (for `<pre>`). */
export function lines(text: string): Html {
  return { [MADE]: true, text: text.split('\n').map(textPiece).join('\n') };
}

function piece(value: Value): string {
  if (value === null || value === undefined || value === false) return '';
  if (isHtml(value)) return value.text;
  if (typeof value === 'object') return value.map(piece).join('');
  return textPiece(String(value));
}

function isHtml(value: Value): value is Html {
  return typeof value === 'object' && value !== null && MADE in value;
}

function textPiece(text: string): string {
  return escapeHtml(renderServerText(text));
}

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"'`]/g, (c) => ESCAPES[c]!);
}

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
  '`': '&#96;',
};
