import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const SRC = fileURLToPath(new URL('../../src/', import.meta.url));

/**
 * The folders of src, from the bottom up: a module may import from its own folder and from
 * folders below it, never above (docs/architecture.md, "Layers"). A new folder must be placed here.
 */
export const LAYERS = [
  'util',
  'policy',
  'config',
  'mcp',
  'protocol',
  'packages',
  'profile',
  'approvals',
  'audit',
  'database',
  'engine',
  'sandbox',
  'console',
  'confirmation',
  'catalog',
  'gateway',
  'session',
  'serve',
  'import',
  'cli',
] as const;

/** Every relative import of every module of src, as [importer, imported], paths from src. */
function importsOf(): [string, string][] {
  const files = readdirSync(SRC, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'));
  return files.flatMap((file) => {
    const text = readFileSync(path.join(SRC, file), 'utf8');
    return [...text.matchAll(/(?:from|import\()\s*'(\.{1,2}\/[^']+)'/g)].map((m): [string, string] => [
      file,
      path.normalize(path.join(path.dirname(file), m[1]!)),
    ]);
  });
}

/** The layer of a module: its top folder's place in LAYERS (-1 for src's own files, e.g. index.ts). */
function layerOf(file: string): number {
  const top = file.includes(path.sep) ? file.split(path.sep)[0]! : '';
  if (top === '') return -1;
  const layer = LAYERS.indexOf(top as (typeof LAYERS)[number]);
  assert.notEqual(
    layer,
    -1,
    `src/${top}/ is in no layer: place it in LAYERS (test/unit/layers.test.ts) and in the layout of docs/architecture.md`,
  );
  return layer;
}

/** The imports that point up a layer. */
function upward(imports: readonly [string, string][]): string[] {
  return imports
    .filter(([from, to]) => layerOf(from) >= 0 && layerOf(to) > layerOf(from))
    .map(([from, to]) => `src/${from} imports src/${to}`);
}

describe('layers of src', () => {
  it('imports only point down (or within a folder)', () => {
    assert.deepEqual(upward(importsOf()), []);
  });

  it('finds a planted upward import (the check can fail)', () => {
    const planted: [string, string][] = [
      [path.join('database', 'x.ts'), path.join('engine', 'sandbox-engine.ts')],
      [path.join('policy', 'x.ts'), path.join('policy', 'y.ts')],
      [path.join('cli', 'x.ts'), path.join('util', 'y.ts')],
    ];
    assert.deepEqual(upward(planted), ['src/database/x.ts imports src/engine/sandbox-engine.ts']);
  });
});
