import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import {
  CgroupFreezer,
  findFreezerCgroup,
  KEEP_FROZEN_PREFIX,
  openCgroupFreezer,
  sweepKeepFrozenGroups,
} from '../../src/engine/cgroup-freezer.js';

const ID = 'c180d3991dd3ae69497380af710bc65fb5ddd3f928cf9aa3f273b8f93b20c7f6';
const OTHER = 'a'.repeat(64);
// This machine's, trimmed: cgroup v1 (cgroupfs driver) with the unified hierarchy beside it.
const MOUNTINFO_V1 = [
  '25 0 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw',
  '30 24 0:26 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:5 - cgroup2 cgroup2 rw',
  '36 24 0:32 / /sys/fs/cgroup/freezer rw,nosuid,nodev,noexec,relatime shared:14 - cgroup cgroup rw,freezer',
  '37 24 0:33 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,pids',
].join('\n');
const MOUNTINFO_V2 = '30 24 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:5 - cgroup2 cgroup2 rw';
const DOCKER_V1 = `8:pids:/docker/${ID}\n6:freezer:/docker/${ID}\n0::/docker/${ID}\n`;

describe('findFreezerCgroup', () => {
  it("finds Docker's and Podman's v1 freezer cgroups, the v1 line winning over the unified one", () => {
    assert.deepEqual(findFreezerCgroup(DOCKER_V1, MOUNTINFO_V1, ID), {
      version: 1,
      dir: `/sys/fs/cgroup/freezer/docker/${ID}`,
      mount: '/sys/fs/cgroup/freezer',
    });
    assert.deepEqual(findFreezerCgroup(`6:freezer:/libpod_parent/libpod-${ID}\n`, MOUNTINFO_V1, ID), {
      version: 1,
      dir: `/sys/fs/cgroup/freezer/libpod_parent/libpod-${ID}`,
      mount: '/sys/fs/cgroup/freezer',
    });
  });

  it('finds a v2 cgroup, cut at the segment naming the container (all of it is frozen)', () => {
    assert.deepEqual(findFreezerCgroup(`0::/machine.slice/libpod-${ID}.scope/container\n`, MOUNTINFO_V2, ID), {
      version: 2,
      dir: `/sys/fs/cgroup/machine.slice/libpod-${ID}.scope`,
      mount: '/sys/fs/cgroup',
    });
    assert.deepEqual(findFreezerCgroup(`0::/system.slice/docker-${ID}.scope\n`, MOUNTINFO_V2, ID), {
      version: 2,
      dir: `/sys/fs/cgroup/system.slice/docker-${ID}.scope`,
      mount: '/sys/fs/cgroup',
    });
  });

  // proves: HELD-WOKEN
  it('refuses a cgroup that does not name the container: a reused pid, another PID namespace', () => {
    const found = findFreezerCgroup(`6:freezer:/docker/${OTHER}\n`, MOUNTINFO_V1, ID);
    assert.match(String((found as { problem: string }).problem), /does not name the container/);
    assert.ok('problem' in findFreezerCgroup('6:freezer:/\n0::/init.scope\n', MOUNTINFO_V1, ID));
    assert.ok('problem' in findFreezerCgroup(DOCKER_V1, MOUNTINFO_V1, 'c180d399'), 'a short id is refused');
  });

  it('refuses where no such hierarchy is mounted, or the cgroup lies outside the mounted part', () => {
    assert.match(
      String(
        (
          findFreezerCgroup(DOCKER_V1, MOUNTINFO_V2.replace('cgroup2 cgroup2', 'tmpfs tmpfs'), ID) as {
            problem: string;
          }
        ).problem,
      ),
      /no cgroup v1 freezer hierarchy/,
    );
    const namespaced = MOUNTINFO_V2.replace(' / /sys/fs/cgroup', ' /kubepods /sys/fs/cgroup');
    assert.ok('problem' in findFreezerCgroup(`0::/docker/${ID}\n`, namespaced, ID));
    assert.deepEqual(findFreezerCgroup(`0::/kubepods/pod1/${ID}\n`, namespaced, ID), {
      version: 2,
      dir: `/sys/fs/cgroup/pod1/${ID}`,
      mount: '/sys/fs/cgroup',
    });
  });
});

describe('CgroupFreezer', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'hintbox-unit-freezer-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('v1: writes FROZEN and resolves once the state reads FROZEN; thaw writes THAWED', async () => {
    writeFileSync(path.join(dir, 'freezer.state'), 'THAWED\n');
    const freezer = new CgroupFreezer({ version: 1, dir });
    await freezer.freeze();
    assert.equal(readFileSync(path.join(dir, 'freezer.state'), 'utf8'), 'FROZEN');
    await freezer.thaw();
    assert.equal(readFileSync(path.join(dir, 'freezer.state'), 'utf8'), 'THAWED');
  });

  // proves: HELD-WOKEN
  it('v2: writes 1 and fails when cgroup.events never says frozen 1 within the limit (a failed freeze)', async () => {
    writeFileSync(path.join(dir, 'cgroup.freeze'), '0\n');
    writeFileSync(path.join(dir, 'cgroup.events'), 'populated 1\nfrozen 0\n');
    const freezer = new CgroupFreezer({ version: 2, dir }, 50);
    await assert.rejects(freezer.freeze(), /was not frozen within 50 ms/);
    assert.equal(readFileSync(path.join(dir, 'cgroup.freeze'), 'utf8'), '1');
    writeFileSync(path.join(dir, 'cgroup.events'), 'populated 1\nfrozen 1\n');
    await freezer.freeze();
    await freezer.thaw();
    assert.equal(readFileSync(path.join(dir, 'cgroup.freeze'), 'utf8'), '0');
  });

  // proves: HELD-UNTIL-CALLED
  it('undoes a freeze still under way when cancelled (a call came in): thawed, resolves cancelled, never rejects', async () => {
    writeFileSync(path.join(dir, 'cgroup.freeze'), '0\n');
    writeFileSync(path.join(dir, 'cgroup.events'), 'populated 1\nfrozen 0\n'); // tasks on their way in
    const freezer = new CgroupFreezer({ version: 2, dir }, 1000);
    const cancel = new AbortController();
    const freezing = freezer.freeze(cancel.signal);
    await new Promise((r) => setTimeout(r, 5)); // past the polls of every turn: in the 1 ms sleeps
    assert.equal(readFileSync(path.join(dir, 'cgroup.freeze'), 'utf8'), '1', 'the freeze was asked');
    const asked = Date.now();
    cancel.abort();
    assert.equal(await freezing, 'cancelled');
    assert.ok(Date.now() - asked < 100, 'at once, not at the end of the limit');
    assert.equal(readFileSync(path.join(dir, 'cgroup.freeze'), 'utf8'), '0', 'no task is left half frozen');
  });

  it('fails a freeze whose file cannot be written (the sandbox is then removed)', async () => {
    const freezer = new CgroupFreezer({ version: 1, dir: path.join(dir, 'gone') });
    await assert.rejects(freezer.freeze(), /cannot write/);
    await assert.rejects(freezer.thaw(), /cannot write/);
  });

  it('opens no freezer without a pid, or where the process cannot be read', () => {
    assert.ok('problem' in openCgroupFreezer(0, ID));
    const unreadable = openCgroupFreezer(123, ID, () => {
      throw new Error('ENOENT');
    });
    assert.match(String((unreadable as { problem: string }).problem), /cannot read its process's cgroup/);
  });
});

describe('sweepKeepFrozenGroups', () => {
  it('removes the keep-frozen groups of dead hintbox processes, and nothing else', () => {
    const root = mkdtempSync(path.join(os.tmpdir(), 'hintbox-keep-'));
    try {
      for (const name of [`${KEEP_FROZEN_PREFIX}111`, `${KEEP_FROZEN_PREFIX}222`, 'docker'])
        mkdirSync(path.join(root, name));
      const mountinfo = `36 24 0:32 / ${root} rw,relatime shared:14 - cgroup cgroup rw,freezer`;
      const swept = sweepKeepFrozenGroups((pid) => pid === 222, mountinfo);
      assert.deepEqual(swept, [path.join(root, `${KEEP_FROZEN_PREFIX}111`)]);
      assert.deepEqual(readdirSync(root).sort(), ['docker', `${KEEP_FROZEN_PREFIX}222`]);
      // No v1 freezer mounted: nothing to sweep.
      assert.deepEqual(
        sweepKeepFrozenGroups(() => false, MOUNTINFO_V2),
        [],
      );
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
