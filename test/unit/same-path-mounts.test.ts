import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import type Docker from 'dockerode';
import { findOwnContainer, resolvedSource, stageGate } from '../../src/engine/docker/own-container.js';
import {
  containerIdFromMountinfo,
  samePathProblems,
  type ContainerMount,
} from '../../src/engine/docker/same-path-mounts.js';
import { sandboxBindSources } from '../../src/serve/bind-sources.js';
import { scratchFolder } from '../support/scratch-folder.js';

const bind = (source: string, destination: string): ContainerMount => ({ type: 'bind', source, destination });
const SOCKET = bind('/var/run/docker.sock', '/var/run/docker.sock');

describe('samePathProblems', () => {
  it('accepts paths in bind mounts whose host source is the same path, the innermost mount deciding', () => {
    const mounts = [SOCKET, bind('/srv', '/srv'), bind('/var/lib/hintbox', '/var/lib/hintbox')];
    assert.deepEqual(
      samePathProblems(mounts, [
        { path: '/srv', what: 'a' },
        { path: '/srv/data/deep', what: 'b' },
        { path: '/var/lib/hintbox/state', what: 'c' },
      ]),
      [],
    );
    // /srv/data mounted from elsewhere inside /srv: the inner mount serves /srv/data/x.
    assert.deepEqual(
      samePathProblems([bind('/srv', '/srv'), bind('/mnt/other', '/srv/data')], [{ path: '/srv/data/x', what: 'm' }]),
      [
        "m /srv/data/x is the host's /mnt/other/x (mounted at another path): mount the host's /srv/data/x at the same path (docker run -v /srv/data/x:/srv/data/x)",
      ],
    );
  });

  // proves: CONTAINER-SAME-PATH
  it("names a path mounted from another host path, one in the container's own files and one in a volume, with the -v that fixes it", () => {
    const mounts = [
      SOCKET,
      bind('/home/ops/data', '/data'),
      { type: 'volume', source: '/var/lib/docker/volumes/v/_data', destination: '/var/lib/hintbox' },
    ];
    assert.deepEqual(
      samePathProblems(mounts, [
        { path: '/data/in', what: "liar's mount /data" },
        { path: '/etc/hintbox/profiles', what: 'the profiles' },
        { path: '/var/lib/hintbox/state', what: "hintbox's state folder" },
      ]),
      [
        "liar's mount /data /data/in is the host's /home/ops/data/in (mounted at another path): mount the host's /data/in at the same path (docker run -v /data/in:/data/in)",
        "the profiles /etc/hintbox/profiles is in hintbox's container, not on the host: mount the host's /etc/hintbox/profiles at the same path (docker run -v /etc/hintbox/profiles:/etc/hintbox/profiles)",
        "hintbox's state folder /var/lib/hintbox/state is in a Docker volume mounted at /var/lib/hintbox, not a host folder: mount the host's /var/lib/hintbox/state at the same path (docker run -v /var/lib/hintbox/state:/var/lib/hintbox/state)",
      ],
    );
  });

  it('does not take a prefix of a name for a folder (/srv-other is not in /srv), and names a path once', () => {
    const problems = samePathProblems(
      [bind('/srv', '/srv')],
      [
        { path: '/srv-other', what: 'x' },
        { path: '/srv-other', what: 'y' },
      ],
    );
    assert.equal(problems.length, 1);
    assert.match(problems[0]!, /^x \/srv-other is in hintbox's container/);
  });

  it('does not name a path inside one already named (the gate in a state folder that is not on the host)', () => {
    const problems = samePathProblems(
      [bind('/srv', '/srv')],
      [
        { path: '/var/lib/hintbox/state', what: 'state' },
        { path: '/var/lib/hintbox/state/gate/hintbox-gate-0123', what: 'gate' },
        { path: '/srv/ok', what: 'fine' },
      ],
    );
    assert.deepEqual(
      problems.map((p) => p.split(' ')[0]),
      ['state'],
    );
  });

  it('accepts everything under a same-path bind of /', () => {
    assert.deepEqual(samePathProblems([bind('/', '/')], [{ path: '/anything/at/all', what: 'x' }]), []);
  });
});

describe('containerIdFromMountinfo', () => {
  const id = 'ae9a4623b6614f1472bf59898dea228038cd04f943e9d80f16029e2bb459221e';
  it("finds the id in the engine's hostname/hosts/resolv.conf binds", () => {
    const text = [
      '75 60 0:45 / / rw,relatime - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/X',
      `92 75 254:0 /var/lib/docker/containers/${id}/resolv.conf /etc/resolv.conf rw,relatime - ext4 /dev/vda rw`,
      `93 75 254:0 /var/lib/docker/containers/${id}/hostname /etc/hostname rw,relatime - ext4 /dev/vda rw`,
    ].join('\n');
    assert.equal(containerIdFromMountinfo(text), id);
  });
  it('finds none on a host', () => {
    assert.equal(containerIdFromMountinfo('22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n'), undefined);
  });
});

describe('findOwnContainer', () => {
  const noDocker = {} as Docker;
  it('looks for nothing when HINTBOX_IN_CONTAINER=0, or when unset and there is no /.dockerenv', async () => {
    const dir = scratchFolder('hintbox-own-');
    writeFileSync(path.join(dir, 'dockerenv'), '');
    const files = { dockerenv: path.join(dir, 'dockerenv'), mountinfo: path.join(dir, 'none') };
    assert.equal(await findOwnContainer(noDocker, false, files), undefined);
    assert.equal(
      await findOwnContainer(noDocker, undefined, { ...files, dockerenv: path.join(dir, 'absent') }),
      undefined,
    );
  });
  it('takes an engine that does not know the container for one beside hintbox, unless the image said it is in one', async () => {
    const dir = scratchFolder('hintbox-own-');
    writeFileSync(path.join(dir, 'dockerenv'), '');
    writeFileSync(
      path.join(dir, 'mountinfo'),
      `1 1 1:1 /var/lib/docker/containers/${'a'.repeat(64)}/hosts /etc/hosts rw - ext4 x rw\n`,
    );
    const files = { dockerenv: path.join(dir, 'dockerenv'), mountinfo: path.join(dir, 'mountinfo') };
    const unknown = {
      getContainer: () => ({ inspect: () => Promise.reject(new Error('no such container')) }),
    } as unknown as Docker;
    assert.equal(await findOwnContainer(unknown, undefined, files), undefined);
    await assert.rejects(findOwnContainer(unknown, true, files), (error: Error & { exitCode?: number }) => {
      assert.match(error.message, /^HINTBOX_IN_CONTAINER=1, but the Docker engine does not know this container/);
      assert.equal(error.exitCode, 2);
      return true;
    });
  });
});

describe('stageGate and resolvedSource', () => {
  it('copies the gate into the state folder under a name of its content, read-only, once', () => {
    const gate = path.resolve('dist/hintbox-gate');
    const state = scratchFolder('hintbox-stage-');
    const copy = stageGate(state, gate);
    assert.match(copy, /\/gate\/hintbox-gate-[0-9a-f]{16}$/);
    assert.ok(readFileSync(copy).equals(readFileSync(gate)));
    assert.equal(statSync(copy).mode & 0o777, 0o555);
    assert.equal(stageGate(state, gate), copy);
    // Someone who can write the state folder swaps the copy: the next start puts the gate back.
    rmSync(copy);
    writeFileSync(copy, '#!/bin/sh\necho not the gate\n', { mode: 0o755 });
    assert.equal(stageGate(state, gate), copy);
    assert.ok(readFileSync(copy).equals(readFileSync(gate)), 'the gate, not what was put there');
  });
  it('resolves symbolic links of paths that exist', () => {
    const dir = scratchFolder('hintbox-resolve-');
    mkdirSync(path.join(dir, 'real'));
    symlinkSync(path.join(dir, 'real'), path.join(dir, 'link'));
    assert.equal(resolvedSource({ path: path.join(dir, 'link'), what: 'x' }).path, path.join(dir, 'real'));
    assert.equal(resolvedSource({ path: '/no/such/path', what: 'x' }).path, '/no/such/path');
  });
});

describe('sandboxBindSources', () => {
  it("lists every profile's mounts, the temporary folder and the state folder (the audit folder where it is elsewhere)", () => {
    const profiles = [
      { name: 'liar', mounts: [{ source: '/srv/data', target: '/data', mode: 'rw' as const }] },
      { name: 'every', mounts: [] },
    ];
    const inState = sandboxBindSources(
      profiles,
      { stateDir: '/var/lib/hb', auditDir: '/var/lib/hb/audit' },
      '/var/tmp/hb',
    );
    assert.deepEqual(
      inState.map((s) => s.path),
      ['/srv/data', '/var/tmp/hb', '/var/lib/hb'],
    );
    assert.equal(inState[0]?.what, "liar's mount /data");
    const apart = sandboxBindSources(profiles, { stateDir: '/var/lib/hb', auditDir: '/var/log/hb' }, '/tmp');
    assert.deepEqual(
      apart.map((s) => s.path),
      ['/srv/data', '/tmp', '/var/lib/hb', '/var/log/hb'],
    );
  });
});
