import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { hostMountPoints, nestedMountPoints, parseMountPoints } from '../../src/sandbox/nested-mounts.js';

const MOUNTINFO = [
  '22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw',
  '23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw',
  '36 22 98:0 /mnt1 /srv/my\\040data rw,noatime master:1 - ext3 /dev/root rw,errors=continue',
  '37 36 0:45 / /srv/my\\040data/cache rw,relatime - tmpfs tmpfs rw',
  '38 22 0:46 / /srv/tab\\011name rw - tmpfs tmpfs rw',
  '39 22 0:47 / /srv/back\\134slash rw - tmpfs tmpfs rw',
  '40 22 0:48 / /srv/new\\012line rw - tmpfs tmpfs rw',
  '',
].join('\n');

describe('parseMountPoints', () => {
  it('reads field 5 of each line and decodes octal escapes', () => {
    assert.deepEqual(parseMountPoints(MOUNTINFO), [
      '/',
      '/proc',
      '/srv/my data',
      '/srv/my data/cache',
      '/srv/tab\tname',
      '/srv/back\\slash',
      '/srv/new\nline',
    ]);
  });

  it('ignores blank and short lines', () => {
    assert.deepEqual(parseMountPoints(''), []);
    assert.deepEqual(parseMountPoints('\n\n'), []);
    assert.deepEqual(parseMountPoints('1 2 3\n22 1 8:1 / /x rw - ext4 /dev/sda1 rw\n'), ['/x']);
  });

  it('decodes an escaped backslash only once', () => {
    // "\134040" is a backslash followed by the text "040", not a space
    assert.deepEqual(parseMountPoints('1 1 0:1 / /a\\134040b rw - tmpfs tmpfs rw'), ['/a\\040b']);
  });

  it('reads the real mount table of this host', () => {
    const points = hostMountPoints();
    assert.ok(points.includes('/'), 'the root is a mount point');
    assert.ok(
      points.every((p) => p.startsWith('/')),
      "points.every((p) => p.startsWith('/'))",
    );
  });
});

describe('nestedMountPoints', () => {
  const points = parseMountPoints(MOUNTINFO);

  it('finds mount points strictly inside the source', () => {
    assert.deepEqual(nestedMountPoints('/srv/my data', points), ['/srv/my data/cache']);
    assert.deepEqual(nestedMountPoints('/srv/my data/', points), ['/srv/my data/cache']);
    assert.deepEqual(nestedMountPoints('/srv', points).sort(), [
      '/srv/back\\slash',
      '/srv/my data',
      '/srv/my data/cache',
      '/srv/new\nline',
      '/srv/tab\tname',
    ]);
  });

  it('ignores the source itself, its parents and siblings with a common prefix', () => {
    assert.deepEqual(nestedMountPoints('/srv/my data/cache', points), []);
    assert.deepEqual(nestedMountPoints('/srv/my', points), []);
    assert.deepEqual(nestedMountPoints('/data', ['/', '/data', '/database', '/data2/x', '/dat']), []);
  });

  it('lists each mount point once even when it is mounted over several times', () => {
    assert.deepEqual(nestedMountPoints('/data', ['/data/a', '/data/a', '/data/b', '/data/a']), ['/data/a', '/data/b']);
  });

  it('everything is nested under /', () => {
    assert.deepEqual(nestedMountPoints('/', ['/', '/proc', '/a/b']), ['/proc', '/a/b']);
  });

  it('finds a mount point whose name starts with two dots', () => {
    assert.deepEqual(nestedMountPoints('/data', ['/data/..cache']), ['/data/..cache']);
  });
});
