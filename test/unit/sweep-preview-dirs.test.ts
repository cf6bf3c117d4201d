import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { sweepPreviewDirs } from '../../src/sandbox/preview.js';

const base = mkdtempSync(path.join(os.tmpdir(), 'hintbox-sweep-preview-'));
after(() => rmSync(base, { recursive: true, force: true }));

describe('sweepPreviewDirs', () => {
  it('removes the copies of a dead hintbox, even with folders a dry run locked, and keeps a live one', async () => {
    const dead = path.join(base, 'hintbox-preview-2147483646-abc');
    const locked = path.join(dead, 'm0', 'locked');
    mkdirSync(locked, { recursive: true });
    writeFileSync(path.join(locked, 'f'), 'x');
    chmodSync(locked, 0o000);
    const live = path.join(base, `hintbox-preview-${process.pid}-def`);
    mkdirSync(live);
    const other = path.join(base, 'hintbox-preview-notapid');
    mkdirSync(other);
    assert.deepEqual(await sweepPreviewDirs(base), [dead]);
    assert.equal(existsSync(dead), false, 'the dead run’s copy is gone');
    assert.equal(existsSync(live), true, 'a live run’s copy is kept');
    assert.equal(existsSync(other), true, 'a folder without a pid is not ours to judge');
  });
});
