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

describe("docs/architecture.md's layout section", () => {
  it('names every folder of src and test, and no folder that is gone', () => {
    const page = readFileSync(path.join(REPO, 'docs/architecture.md'), 'utf8');
    const start = page.indexOf('\n## Layout\n');
    assert.notEqual(start, -1, 'docs/architecture.md has no "## Layout" section');
    const end = page.indexOf('\n## ', start + 1);
    const section = page.slice(start, end === -1 ? undefined : end);
    const rows = [...section.matchAll(/^\| `((?:src|test)\/[^`]*)` \|/gm)].map((m) => m[1]);
    assert.deepEqual([...rows].sort(), [...folders('src'), ...folders('test')].sort());
  });
});
