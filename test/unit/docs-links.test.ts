import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { SECURITY_DOC_SOURCE } from '../support/security-doc.js';

const REPO = fileURLToPath(new URL('../../', import.meta.url));

/**
 * The pages a reader follows: the README, CONTRIBUTING.md and every page of docs/ (not the
 * security page's source: the page made of it is checked).
 */
const PAGES = [
  'README.md',
  'CONTRIBUTING.md',
  ...readdirSync(path.join(REPO, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`)
    .filter((p) => p !== SECURITY_DOC_SOURCE),
];

/** A page's text without its fenced code blocks (their `#` lines and brackets are not Markdown). */
function prose(page: string): string {
  return readFileSync(path.join(REPO, page), 'utf8').replace(/^```[^\n]*\n[\s\S]*?^```$/gm, '');
}

/** A heading's anchor as GitHub makes it: the text lower-cased, punctuation dropped, spaces as `-`. */
function slug(heading: string): string {
  const text = heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/[`*]/g, '')
    .trim()
    .toLowerCase();
  return text.replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
}

/** Every anchor of a page, duplicates numbered as GitHub numbers them (`-1`, `-2`, …). */
function anchorsOf(page: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const [, heading] of prose(page).matchAll(/^#{1,6} (.+)$/gm)) {
    const base = slug(heading!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

/** Every Markdown link (and image) of a page outside code: its target as written. */
function linksOf(page: string): string[] {
  const text = prose(page).replace(/`[^`\n]*`/g, '');
  return [...text.matchAll(/!?\[[^\]]*\]\(([^)\s]+)\)/g)].map((m) => m[1]!);
}

/** What is wrong with one link of a page, or null. */
function brokenLink(page: string, target: string): string | null {
  if (/^(https?|mailto):/.test(target)) return null;
  const [file, anchor] = target.split('#', 2) as [string, string | undefined];
  const resolved = file === '' ? page : path.normalize(path.join(path.dirname(page), file));
  if (!existsSync(path.join(REPO, resolved))) return `${page}: ${target}: no such file`;
  if (anchor === undefined || !resolved.endsWith('.md')) return null;
  return anchorsOf(resolved).has(anchor) ? null : `${page}: ${target}: no heading makes #${anchor} in ${resolved}`;
}

describe('the documentation', () => {
  it('has no link to a file or a heading that is not there', () => {
    const broken = PAGES.flatMap((page) => linksOf(page).flatMap((t) => brokenLink(page, t) ?? []));
    assert.deepEqual(broken, []);
  });

  it('names in code only files of the repository that exist', () => {
    const missing = PAGES.flatMap((page) =>
      [
        ...readFileSync(path.join(REPO, page), 'utf8').matchAll(
          /`((?:src|test|native|scripts|images|examples)\/[^`\s]+)`/g,
        ),
      ]
        .map((m) => m[1]!)
        .filter((p) => !/[*<…]/.test(p) && !existsSync(path.join(REPO, p)))
        .map((p) => `${page}: ${p}`),
    );
    assert.deepEqual(missing, []);
  });

  it('links every page of docs/ from the README', () => {
    const linked = new Set(linksOf('README.md').map((t) => t.split('#')[0]));
    const unlinked = PAGES.filter((p) => p.startsWith('docs/') && !linked.has(p));
    assert.deepEqual(unlinked, []);
  });

  it('keeps the README an entry: at most 250 lines', () => {
    const lines = readFileSync(path.join(REPO, 'README.md'), 'utf8').split('\n').length - 1;
    assert.ok(lines <= 250, `README.md has ${lines} lines: move reference text to docs/`);
  });
});
