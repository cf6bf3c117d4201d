import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const REPO = fileURLToPath(new URL('../../', import.meta.url));

/** Folders of src/ and test/ (fixture servers' own folders are test/fixtures'). */
function folders(dir: string): string[] {
  const here = `${dir}/`;
  if (dir === 'test/fixtures') return [here];
  const below = readdirSync(path.join(REPO, dir), { withFileTypes: true })
    .filter((e) => e.isDirectory() && e.name !== 'node_modules')
    .flatMap((e) => folders(`${dir}/${e.name}`));
  return [here, ...below];
}

describe("README's layout section", () => {
  it('names every folder of src and test, and no folder that is gone', () => {
    const readme = readFileSync(path.join(REPO, 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('### Layout'));
    const rows = [...section.matchAll(/^\| `((?:src|test)\/[^`]*)` \|/gm)].map((m) => m[1]);
    assert.deepEqual([...rows].sort(), [...folders('src'), ...folders('test')].sort());
  });
});
