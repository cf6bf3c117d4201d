import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after } from 'node:test';
import { PGlite } from '@electric-sql/pglite';

/**
 * Fresh PGlite state folders for tests, fast: a pristine database is made once per test file
 * (PGlite's first start is an initdb, seconds) and copied into each new folder's `pgdata/`.
 */
export function pgliteFolders(prefix: string): { root: string; newFolder: (name?: string) => Promise<string> } {
  const root = mkdtempSync(path.join(os.tmpdir(), prefix));
  after(() => rmSync(root, { recursive: true, force: true }));
  let template: Promise<string> | undefined;
  const pristine = (): Promise<string> =>
    (template ??= (async () => {
      const dir = path.join(root, 'template');
      await (await PGlite.create(dir)).close();
      return dir;
    })());
  return {
    root,
    newFolder: async (name = 'state-') => {
      const dir = mkdtempSync(path.join(root, name));
      cpSync(await pristine(), path.join(dir, 'pgdata'), { recursive: true });
      return dir;
    },
  };
}
