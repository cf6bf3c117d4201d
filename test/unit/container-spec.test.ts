import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { FALLBACK_SANDBOX_USER, parseSize, sandboxUser } from '../../src/profile/profile-schema.js';
import {
  LABEL_CLASS,
  LABEL_OWNER_HOST,
  LABEL_OWNER_PID,
  LABEL_SERVER,
  LABEL_SESSION,
  containerName,
} from '../../src/engine/sandbox-labels.js';
import { SANDBOX_HOME, SANDBOX_TMP, serverCommand } from '../../src/engine/sandbox-process.js';
import { buildContainerSpec, type ContainerSpecInput } from '../../src/engine/docker/container-spec.js';
import { sandboxUserIds } from '../../src/engine/sandbox-engine.js';
import {
  GATE_EGRESS_ENV,
  GATE_EGRESS_TOKEN_ENV,
  GATE_SOCKET_ENV,
  GATE_TOKEN_ENV,
  GATE_TUNABLES_ENV,
  SANDBOX_EGRESS_DIR,
  SANDBOX_IO_DIR,
} from '../../src/engine/gate-variables.js';
import { SANDBOX_GATE_PATH } from '../../src/engine/docker/gate.js';
import { SANDBOX_PG_SOCKET_DIR, sandboxDatabaseEnv } from '../../src/database/socket-relay.js';
import { planSandboxes, type Ceiling, type PlannedSandbox } from '../../src/policy/plan-sandboxes.js';

const CANARY = 'HINTBOX_TEST_CANARY_7f3a';
const GATE = {
  binary: '/opt/hintbox/dist/hintbox-gate',
  hostDir: '/tmp/hintbox-io-Ab12Cd',
  sandboxPath: '/run/hintbox/io/f00d.sock',
  token: 'c0ffee',
};
/** What every sandbox's environment holds for the gate (and against the image's libc tunables). */
const GATE_ENV = [
  `${GATE_SOCKET_ENV}=${GATE.sandboxPath}`,
  `${GATE_TOKEN_ENV}=c0ffee`,
  'GLIBC_TUNABLES=',
  `${GATE_TUNABLES_ENV}=`,
  // Always set, empty without egress (see the relay's test below).
  `${GATE_EGRESS_ENV}=`,
  `${GATE_EGRESS_TOKEN_ENV}=`,
];
/** The gate's own mounts: the binary and its socket folder, both read-only. */
const GATE_MOUNTS = [
  ['bind', GATE.binary, SANDBOX_GATE_PATH, true],
  ['bind', GATE.hostDir, SANDBOX_IO_DIR, true],
];

const ceiling: Ceiling = {
  mounts: [
    { source: '/srv/projects', target: '/projects', mode: 'rw' },
    { source: '/srv/reference', target: '/reference', mode: 'ro' },
  ],
  network: 'open',
  split: true,
  overrides: {},
};

const plan = planSandboxes(
  [
    { name: 'read', annotations: { readOnlyHint: true, openWorldHint: false } },
    { name: 'write', annotations: { readOnlyHint: false, openWorldHint: false } },
    { name: 'fetch', annotations: { readOnlyHint: true, openWorldHint: true } },
  ],
  ceiling,
);

function sandboxOfTool(name: string): PlannedSandbox {
  const id = plan.tools.find((t) => t.name === name)!.sandbox;
  return plan.sandboxes.find((s) => s.id === id)!;
}

function input(overrides: Partial<ContainerSpecInput> = {}, sandbox = sandboxOfTool('read')): ContainerSpecInput {
  return {
    session: { sessionId: 'sess42', ownerHost: 'host-a', ownerPid: 4242 },
    profile: {
      name: 'filesystem',
      server: { image: 'hintbox/filesystem:test', args: ['/projects'] },
      env: { FOO: 'bar', EMPTY: '' },
      limits: { memory: '256m', cpus: 1.5, pids: 128, tmpfs: '32m' },
    },
    sandboxId: sandbox.id,
    grant: { network: sandbox.network, mounts: sandbox.mounts },
    engine: { recursiveReadOnly: false },
    defaultUser: { uid: 1000, gid: 1000 },
    command: ['node', 'server.js', '/projects'],
    gate: GATE,
    imageVolumes: [],
    openNetwork: 'hintbox-net42-open',
    ...overrides,
  };
}

describe('buildContainerSpec', () => {
  before(() => {
    process.env[CANARY] = 'leaked-from-host';
  });
  after(() => {
    delete process.env[CANARY];
  });

  it("on Podman, owns the home and VOLUME tmpfs with 'U' (it refuses uid=/gid=) and keeps every other option", () => {
    const docker = buildContainerSpec(input({ imageVolumes: ['/data'] })).HostConfig!.Tmpfs!;
    const podman = buildContainerSpec(
      input({ imageVolumes: ['/data'], engine: { recursiveReadOnly: false, kind: 'podman' } }),
    ).HostConfig!.Tmpfs!;
    assert.deepEqual(Object.keys(podman), Object.keys(docker));
    for (const [target, options] of Object.entries(docker)) {
      assert.equal(podman[target], options.replace('uid=1000,gid=1000', 'U'), target);
      assert.doesNotMatch(podman[target], /uid=|gid=/);
    }
  });

  // proves: HARDENING
  it('hardens every sandbox class the same way', () => {
    for (const sandbox of plan.sandboxes) {
      const spec = buildContainerSpec(input({}, sandbox));
      const hc = spec.HostConfig!;
      assert.deepEqual(hc.CapDrop, ['ALL'], sandbox.id);
      assert.ok(!hc.CapAdd || hc.CapAdd.length === 0, `${sandbox.id}: no capability added`);
      assert.ok(hc.SecurityOpt?.includes('no-new-privileges:true'), sandbox.id);
      assert.equal(hc.ReadonlyRootfs, true);
      assert.equal(hc.Privileged, false);
      // No engine init: the gate is PID 1, so that the server cannot stop or kill it (it freezes the sandbox).
      assert.equal(hc.Init, false);
      assert.ok(!hc.PidMode || hc.PidMode === '', 'no host pid namespace');
      assert.notEqual(hc.IpcMode, 'host');
      assert.notEqual(hc.UsernsMode, 'host');
      assert.notEqual(hc.NetworkMode, 'host');
      assert.ok(!hc.Devices || hc.Devices.length === 0, '!hc.Devices || hc.Devices.length === 0');
      assert.equal(spec.WorkingDir, SANDBOX_HOME);
    }
  });

  // proves: LOG-BOUNDED
  it("caps Docker's log of every sandbox (a rotated json-file), whatever the engine's default", () => {
    for (const sandbox of plan.sandboxes) {
      const log = buildContainerSpec(input({}, sandbox)).HostConfig!.LogConfig!;
      assert.equal(log.Type, 'json-file');
      assert.deepEqual(log.Config, { 'max-size': '1m', 'max-file': '2', compress: 'false' });
    }
  });

  // proves: LIMITS
  it('takes pids, memory, swap and CPU limits from the profile', () => {
    const spec = buildContainerSpec(input());
    const hc = spec.HostConfig!;
    assert.equal(hc.PidsLimit, 128);
    assert.equal(hc.Memory, 256 * 1024 * 1024);
    assert.equal(hc.MemorySwap, hc.Memory, 'no extra swap');
    assert.equal(hc.NanoCpus, 1_500_000_000);

    const big = buildContainerSpec(
      input({ profile: { ...input().profile, limits: { memory: '2g', cpus: 0.25, pids: 64, tmpfs: '1048576' } } }),
    ).HostConfig!;
    assert.equal(big.Memory, 2 * 1024 ** 3);
    assert.equal(big.MemorySwap, 2 * 1024 ** 3);
    assert.equal(big.NanoCpus, 250_000_000);
    assert.equal(big.PidsLimit, 64);
    assert.match(big.Tmpfs![SANDBOX_TMP]!, /(^|,)size=1048576(,|$)/);
  });

  // proves: RO-ROOTFS
  it('gives /tmp and HOME a sized tmpfs, HOME owned by the sandbox user', () => {
    const spec = buildContainerSpec(input());
    const tmpfs = spec.HostConfig!.Tmpfs!;
    assert.deepEqual(Object.keys(tmpfs).sort(), ['/home/sandbox', '/tmp']);
    const size = 32 * 1024 * 1024;
    for (const dir of ['/tmp', '/home/sandbox']) {
      assert.match(tmpfs[dir]!, new RegExp(`(^|,)size=${size}(,|$)`), dir);
      assert.match(tmpfs[dir]!, /(^|,)nosuid(,|$)/, dir);
    }
    assert.match(tmpfs['/home/sandbox']!, /(^|,)uid=1000(,|$)/);
    assert.match(tmpfs['/home/sandbox']!, /(^|,)gid=1000(,|$)/);
  });

  it('never runs as root', () => {
    const cases: Array<[ContainerSpecInput['defaultUser'], string | undefined, string]> = [
      [{ uid: 0, gid: 0 }, undefined, FALLBACK_SANDBOX_USER],
      [undefined, undefined, FALLBACK_SANDBOX_USER],
      [{ uid: 1000, gid: 1000 }, undefined, '1000:1000'],
      [{ uid: 1001, gid: 50 }, undefined, '1001:50'],
      [{ uid: 0, gid: 0 }, '2000:3000', '2000:3000'],
      [{ uid: 1000, gid: 1000 }, '2000', '2000:2000'],
    ];
    assert.equal(FALLBACK_SANDBOX_USER, '10001:10001');
    for (const [defaultUser, configured, expected] of cases) {
      const base = input();
      const spec = buildContainerSpec({
        ...base,
        defaultUser,
        profile: { ...base.profile, server: { ...base.profile.server, ...(configured ? { user: configured } : {}) } },
      });
      assert.equal(spec.User, expected, `host ${JSON.stringify(defaultUser)} configured ${configured}`);
      assert.doesNotMatch(spec.User, /^0+(:|$)/);
      const [uid, gid] = expected.split(':');
      assert.match(spec.HostConfig!.Tmpfs!['/home/sandbox']!, new RegExp(`uid=${uid},gid=${gid}`));
    }
  });

  // proves: NO-ROOT
  it('refuses a root user even when given one directly (defense in depth behind the schema)', () => {
    const base = input();
    let user: string | undefined;
    try {
      user = buildContainerSpec({
        ...base,
        profile: { ...base.profile, server: { ...base.profile.server, user: '0:0' } },
      }).User;
    } catch {
      return; // refusing is fine
    }
    assert.doesNotMatch(user ?? '', /^0+(:|$)/);
  });

  // proves: CLOSED-WORLD
  it('has no network at all when the grant has none', () => {
    const spec = buildContainerSpec(input({}, sandboxOfTool('read')));
    assert.equal(spec.HostConfig!.NetworkMode, 'none');
    assert.equal(spec.NetworkDisabled, true);
  });

  // proves: EGRESS-RELAY-ENV
  it("egress is no network: the proxy's folder read-only and the relay's variables, always set so the image cannot set them", () => {
    const read = sandboxOfTool('read');
    const egress = { hostDir: '/tmp/hintbox-eg-4242-Xy12Zw', token: 'beef', socketFile: 'p0123456789ab' };
    const spec = buildContainerSpec(input({ egress }, { ...read, network: 'egress' }));
    assert.equal(spec.HostConfig!.NetworkMode, 'none');
    assert.equal(spec.NetworkDisabled, true);
    const mount = spec.HostConfig!.Mounts!.find((m) => m.Target === SANDBOX_EGRESS_DIR);
    assert.deepEqual([mount?.Source, mount?.ReadOnly], [egress.hostDir, true]);
    assert.ok(spec.Env!.includes(`${GATE_EGRESS_ENV}=${SANDBOX_EGRESS_DIR}/p0123456789ab`));
    assert.ok(spec.Env!.includes(`${GATE_EGRESS_TOKEN_ENV}=beef`));
    assert.ok(spec.Env!.includes('HTTP_PROXY=http://127.0.0.1:3128'));
    assert.throws(() => buildContainerSpec(input({}, { ...read, network: 'egress' })), /egress proxy is not ready/);
    // Without egress, the variables are there and empty: the container's Env overrides the
    // image's ENV, so an image that sets HINTBOX_GATE_EGRESS does not get a relay; nor does the profile.
    const none = buildContainerSpec(
      input({
        profile: { ...input().profile, env: { [GATE_EGRESS_ENV]: '/run/x.sock', [GATE_EGRESS_TOKEN_ENV]: 'x' } },
      }),
    );
    assert.deepEqual(
      none.Env!.filter((e) => e.startsWith('HINTBOX_GATE_EGRESS')).sort(),
      [`${GATE_EGRESS_ENV}=`, `${GATE_EGRESS_TOKEN_ENV}=`].sort(),
    );
    assert.ok(!none.HostConfig!.Mounts!.some((m) => m.Target === SANDBOX_EGRESS_DIR));
  });

  // proves: SANDBOXES-APART
  it("gets the process's open network (never the engine's default bridge) only when the grant has one", () => {
    const fetch = sandboxOfTool('fetch');
    assert.equal(fetch.network, 'bridge');
    const spec = buildContainerSpec(input({}, fetch));
    assert.equal(spec.HostConfig!.NetworkMode, 'hintbox-net42-open');
    assert.notEqual(spec.NetworkDisabled, true);
    assert.throws(() => buildContainerSpec(input({ openNetwork: undefined }, fetch)), /its open network is not ready/);
  });

  // proves: IMAGE-VOLUMES
  it("masks the image's VOLUMEs with tmpfs of the profile's bound, in every class and preview (no anonymous volume)", () => {
    for (const [sandbox, preview] of plan.sandboxes.flatMap((s) => [[s, false] as const, [s, true] as const])) {
      const spec = buildContainerSpec(input({ imageVolumes: ['/data', '/projects'], preview }, sandbox));
      const tmpfs = spec.HostConfig!.Tmpfs!;
      assert.match(tmpfs['/data'] ?? '', new RegExp(`(^|,)size=${parseSize('32m')}(,|$)`), sandbox.id);
      assert.match(tmpfs['/data'] ?? '', /(^|,)noexec(,|$)/);
      // A profile mount at the path itself covers it.
      assert.equal(tmpfs['/projects'], undefined, sandbox.id);
      assert.deepEqual(
        spec.HostConfig!.Mounts!.filter((m) => m.Type !== 'bind'),
        [],
        'no mount of type volume',
      );
    }
  });

  it('mounts read-only when the grant says so, and only then', () => {
    const ro = buildContainerSpec(input({}, sandboxOfTool('read'))).HostConfig!.Mounts!;
    assert.deepEqual(
      ro.map((m) => [m.Type, m.Source, m.Target, m.ReadOnly]),
      [['bind', '/srv/projects', '/projects', true], ['bind', '/srv/reference', '/reference', true], ...GATE_MOUNTS],
    );
    const rw = buildContainerSpec(input({}, sandboxOfTool('write'))).HostConfig!.Mounts!;
    assert.deepEqual(
      rw.map((m) => [m.Type, m.Source, m.Target, m.ReadOnly]),
      [['bind', '/srv/projects', '/projects', false], ['bind', '/srv/reference', '/reference', true], ...GATE_MOUNTS],
    );
  });

  it('asks for recursive read-only only on engines that have it, and only for read-only mounts', () => {
    type BindOpts = { ReadOnlyForceRecursive?: boolean } | undefined;
    const recursive = (m: { BindOptions?: unknown }): boolean | undefined =>
      (m.BindOptions as BindOpts)?.ReadOnlyForceRecursive;

    const old = buildContainerSpec(input({ engine: { recursiveReadOnly: false } }, sandboxOfTool('write'))).HostConfig!
      .Mounts!;
    for (const m of old) assert.equal(recursive(m), undefined, `${m.Target} on an old engine`);

    const modern = buildContainerSpec(input({ engine: { recursiveReadOnly: true } }, sandboxOfTool('write')))
      .HostConfig!.Mounts!;
    const byTarget = new Map(modern.map((m) => [m.Target, m]));
    assert.equal(recursive(byTarget.get('/reference')!), true);
    assert.equal(
      recursive(byTarget.get('/projects')!),
      undefined,
      'a read-write mount is not made recursive read-only',
    );

    const modernRo = buildContainerSpec(input({ engine: { recursiveReadOnly: true } }, sandboxOfTool('read')))
      .HostConfig!.Mounts!;
    for (const m of modernRo.filter((m) => !m.Target.startsWith('/run/hintbox/'))) {
      assert.equal(recursive(m), true, m.Target);
    }
  });

  it('labels the container with session, server, class and owner', () => {
    const sandbox = sandboxOfTool('write');
    const spec = buildContainerSpec(input({}, sandbox));
    assert.equal(spec.Labels![LABEL_SESSION], 'sess42');
    assert.equal(spec.Labels![LABEL_SERVER], 'filesystem');
    assert.equal(spec.Labels![LABEL_CLASS], sandbox.id);
    assert.equal(spec.Labels![LABEL_OWNER_HOST], 'host-a');
    assert.equal(spec.Labels![LABEL_OWNER_PID], '4242');
    assert.equal(LABEL_SESSION, 'hintbox.session');
    assert.equal(LABEL_SERVER, 'hintbox.server');
    assert.equal(LABEL_CLASS, 'hintbox.class');
    assert.equal(
      spec.name,
      containerName({ sessionId: 'sess42', ownerHost: 'host-a', ownerPid: 4242 }, 'filesystem', sandbox.id),
    );
    assert.equal(spec.name, `hintbox-sess42-filesystem-${sandbox.id}`);
  });

  // proves: ENV
  it('passes exactly the declared environment plus HOME and TMPDIR, nothing from the host', () => {
    assert.equal(process.env[CANARY], 'leaked-from-host');
    const spec = buildContainerSpec(input());
    assert.deepEqual(
      [...spec.Env!].sort(),
      ['EMPTY=', 'FOO=bar', `HOME=${SANDBOX_HOME}`, `TMPDIR=${SANDBOX_TMP}`, ...GATE_ENV].sort(),
    );
    assert.ok(
      !spec.Env!.some((e) => e.includes(CANARY) || e.includes('leaked-from-host')),
      "!spec.Env!.some((e) => e.includes(CANARY) || e.includes('leaked-from-host'))",
    );
    for (const name of ['PATH', 'USER', 'DOCKER_HOST', 'SSH_AUTH_SOCK']) {
      assert.ok(!spec.Env!.some((e) => e.startsWith(`${name}=`)), `${name} is not inherited`);
    }
  });

  it('does not let the profile env move HOME or TMPDIR off the tmpfs, nor point the gate elsewhere', () => {
    const base = input();
    const spec = buildContainerSpec({
      ...base,
      profile: { ...base.profile, env: { HOME: '/projects', TMPDIR: '/projects', [GATE_SOCKET_ENV]: '/projects/s' } },
    });
    assert.deepEqual([...spec.Env!].sort(), [...GATE_ENV, `HOME=${SANDBOX_HOME}`, `TMPDIR=${SANDBOX_TMP}`].sort());
  });

  // proves: ENV
  it("hands the profile's GLIBC_TUNABLES to the gate for the server, never to the gate itself", () => {
    const base = input();
    const spec = buildContainerSpec({
      ...base,
      profile: { ...base.profile, env: { GLIBC_TUNABLES: 'glibc.malloc.perturb=42', [GATE_TUNABLES_ENV]: '=evil' } },
    });
    assert.ok(spec.Env!.includes('GLIBC_TUNABLES='), 'the static gate starts untuned');
    assert.ok(
      spec.Env!.includes(`${GATE_TUNABLES_ENV}==glibc.malloc.perturb=42`),
      "the profile's value, for the server",
    );
    assert.equal(spec.Env!.filter((e) => e.startsWith(`${GATE_TUNABLES_ENV}=`)).length, 1);
  });

  // proves: HARDENING
  it('has no Binds and never the Docker socket', () => {
    for (const sandbox of plan.sandboxes) {
      const spec = buildContainerSpec(input({}, sandbox));
      const hc = spec.HostConfig!;
      assert.ok(hc.Binds === undefined || hc.Binds.length === 0, 'no Binds');
      assert.ok(!JSON.stringify(spec).includes('docker.sock'), "!JSON.stringify(spec).includes('docker.sock')");
      assert.ok(!hc.VolumesFrom || hc.VolumesFrom.length === 0, '!hc.VolumesFrom || hc.VolumesFrom.length === 0');
    }
  });

  it('runs the gate first, which runs the resolved command; MCP does not use the container stdin', () => {
    const base = input();
    const spec = buildContainerSpec({
      ...base,
      profile: { ...base.profile, server: { image: 'img:1', workdir: '/work' } },
      command: ['node', 'x.js', '--a'],
    });
    assert.equal(spec.Image, 'img:1');
    assert.deepEqual(spec.Entrypoint, [SANDBOX_GATE_PATH, 'node', 'x.js', '--a']);
    assert.deepEqual(spec.Cmd, [], 'an empty Cmd: nothing of the image is appended');
    assert.equal(spec.WorkingDir, '/work');
    assert.equal(spec.OpenStdin, false);
    assert.equal(spec.AttachStdin, false);
    assert.deepEqual(spec.Healthcheck, { Test: ['NONE'] }, "the image's HEALTHCHECK never runs");
    assert.equal(
      buildContainerSpec({ ...base, imageId: 'sha256:abc' }).Image,
      'sha256:abc',
      'created from the image id resolved at start, not the tag',
    );
    assert.equal(spec.Tty, false);
  });
});

describe('serverCommand', () => {
  const image = { Entrypoint: ['/usr/bin/tini', '--', 'node', 'main.js'], Cmd: ['/data'] };
  it('is what Docker would run', () => {
    assert.deepEqual(serverCommand({ image: 'i' }, image), ['/usr/bin/tini', '--', 'node', 'main.js', '/data']);
    assert.deepEqual(serverCommand({ image: 'i', args: ['/w'] }, image), [
      '/usr/bin/tini',
      '--',
      'node',
      'main.js',
      '/w',
    ]);
    // A profile command replaces the entrypoint and drops the image's cmd, as `docker run --entrypoint` does.
    assert.deepEqual(serverCommand({ image: 'i', command: ['python', 's.py'] }, image), ['python', 's.py']);
    assert.deepEqual(serverCommand({ image: 'i', command: ['python'], args: ['-u'] }, image), ['python', '-u']);
    assert.deepEqual(serverCommand({ image: 'i' }, { Entrypoint: null, Cmd: ['server', '--stdio'] }), [
      'server',
      '--stdio',
    ]);
    assert.deepEqual(serverCommand({ image: 'i' }, { Entrypoint: '/entry', Cmd: null }), ['/entry']);
  });
  it('refuses an image that runs nothing', () => {
    assert.throws(() => serverCommand({ image: 'scratchy' }, {}), /image scratchy names no command/);
    assert.throws(
      () => serverCommand({ image: 'x', args: [] }, { Entrypoint: [], Cmd: ['ignored'] }),
      /names no command/,
    );
  });
});

describe('sizes and users', () => {
  it('parseSize', () => {
    assert.equal(parseSize('512'), 512);
    assert.equal(parseSize('2k'), 2048);
    assert.equal(parseSize('64m'), 64 * 1024 ** 2);
    assert.equal(parseSize('1G'), 1024 ** 3);
    assert.throws(() => parseSize('1t'));
    assert.throws(() => parseSize('abc'));
  });

  it('sandboxUser', () => {
    assert.equal(sandboxUser(undefined, 0, 0), '10001:10001');
    assert.equal(sandboxUser(undefined, undefined, undefined), '10001:10001');
    assert.equal(sandboxUser(undefined, 1000, 1000), '1000:1000');
    assert.equal(sandboxUser(undefined, 1000, undefined), '1000:1000');
    assert.equal(sandboxUser('1234:5', 1000, 1000), '1234:5');
  });
  describe('with a database', () => {
    const env = sandboxDatabaseEnv({ user: 'hintbox_sess42_ro_offline_dbread', password: 'pw', database: 'shop' });
    const database = { socketDir: '/tmp/hintbox-pg-abc123', env };

    // proves: DB-RELAY
    it('binds the relay socket directory read-only at the fixed path, and nothing else changes', () => {
      const without = buildContainerSpec(input());
      const spec = buildContainerSpec(input({ database }));
      const mounts = spec.HostConfig!.Mounts!;
      assert.deepEqual(mounts.slice(0, -1), without.HostConfig!.Mounts);
      assert.deepEqual(mounts.at(-1), {
        Type: 'bind',
        Source: '/tmp/hintbox-pg-abc123',
        Target: SANDBOX_PG_SOCKET_DIR,
        ReadOnly: true,
        BindOptions: { Propagation: 'rprivate' },
      });
      assert.equal(spec.HostConfig!.NetworkMode, without.HostConfig!.NetworkMode);
      assert.equal(spec.NetworkDisabled, without.NetworkDisabled);
    });

    it("passes the role's PG* variables and DATABASE_URL, and still cannot move HOME or TMPDIR", () => {
      const base = input();
      const spec = buildContainerSpec({
        ...base,
        profile: { ...base.profile, env: { FOO: 'bar', PGHOST: 'db.example', HOME: '/x' } },
        database: { ...database, env: { ...env, TMPDIR: '/projects' } },
      });
      const vars = Object.fromEntries(spec.Env!.map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]));
      assert.equal(vars.PGHOST, SANDBOX_PG_SOCKET_DIR, "the role's socket wins over the profile's PGHOST");
      assert.deepEqual(vars, {
        FOO: 'bar',
        ...env,
        HOME: SANDBOX_HOME,
        TMPDIR: SANDBOX_TMP,
        [GATE_SOCKET_ENV]: GATE.sandboxPath,
        [GATE_TOKEN_ENV]: GATE.token,
        GLIBC_TUNABLES: '',
        [GATE_TUNABLES_ENV]: '',
        [GATE_EGRESS_ENV]: '',
        [GATE_EGRESS_TOKEN_ENV]: '',
      });
    });

    // proves: SANDBOX-VALUES
    it("fills ${sandbox:…} in the profile's args and env with this sandbox's own role values", () => {
      const base = input();
      const args = ['--db', '${sandbox:DATABASE_URL}', 'user=${sandbox:PGUSER};host=${sandbox:PGHOST}'];
      const spec = buildContainerSpec({
        ...base,
        profile: {
          ...base.profile,
          server: { ...base.profile.server, args },
          env: { PG_URL: '${sandbox:DATABASE_URL}', PLAIN: 'x' },
        },
        command: ['node', 'server.js', ...args],
        database,
      });
      assert.deepEqual(spec.Entrypoint, [
        SANDBOX_GATE_PATH,
        'node',
        'server.js',
        '--db',
        env.DATABASE_URL,
        `user=${env.PGUSER};host=${SANDBOX_PG_SOCKET_DIR}`,
      ]);
      assert.ok(spec.Env!.includes(`PG_URL=${env.DATABASE_URL}`));
      assert.ok(spec.Env!.includes('PLAIN=x'));
      assert.ok(![...spec.Env!, ...spec.Entrypoint].some((s) => s.includes('${sandbox:')));
    });

    // proves: SANDBOX-VALUES
    it("fills ${sandbox:mount.NAME} with the mount's target, in args and env, without a database", () => {
      const base = input();
      const args = ['--root', '${sandbox:mount.projects}', '--ref=${sandbox:mount.ref}'];
      const spec = buildContainerSpec({
        ...base,
        profile: {
          ...base.profile,
          server: { ...base.profile.server, args },
          env: { ROOT: '${sandbox:mount.projects}' },
          mounts: [
            { name: 'projects', source: '/srv/projects', target: '/projects/', mode: 'rw' },
            { name: 'ref', source: '/srv/reference', target: '/reference', mode: 'ro' },
          ],
        },
        command: ['node', 'server.js', ...args],
      });
      assert.deepEqual(spec.Entrypoint, [
        SANDBOX_GATE_PATH,
        'node',
        'server.js',
        '--root',
        '/projects',
        '--ref=/reference',
      ]);
      assert.ok(spec.Env!.includes('ROOT=/projects'));
      const unnamed = { ...base.profile, server: { ...base.profile.server, args: ['${sandbox:mount.other}'] } };
      assert.throws(
        () => buildContainerSpec({ ...base, profile: unnamed, command: ['node', '${sandbox:mount.other}'] }),
        /^Error: server\.args\[0\]: \$\{sandbox:mount\.other\} has no value in this sandbox/,
      );
    });

    it("leaves the image's own entrypoint and cmd as they are", () => {
      const base = input();
      const fromImage = ['/entry', '${sandbox:PGHOST}'];
      const server = { image: base.profile.server.image };
      const own = buildContainerSpec({ ...base, profile: { ...base.profile, server }, command: fromImage, database });
      assert.deepEqual(own.Entrypoint, [SANDBOX_GATE_PATH, ...fromImage]);
      const withArgs = { ...server, args: ['${sandbox:PGHOST}'] };
      const spec = buildContainerSpec({
        ...base,
        profile: { ...base.profile, server: withArgs },
        command: [...fromImage, '${sandbox:PGHOST}'],
        database,
      });
      assert.deepEqual(spec.Entrypoint, [SANDBOX_GATE_PATH, ...fromImage, SANDBOX_PG_SOCKET_DIR]);
    });

    it('refuses to build a sandbox whose profile asks for a value it does not have, in one line', () => {
      const base = input();
      const args = ['--db', '${sandbox:DATABASE_URL}'];
      const withArgs = { ...base, profile: { ...base.profile, server: { ...base.profile.server, args } } };
      assert.throws(
        () => buildContainerSpec({ ...withArgs, command: ['node', ...args] }),
        /^Error: server\.args\[1\]: \$\{sandbox:DATABASE_URL\} has no value in this sandbox/,
      );
      const withEnv = { ...base, profile: { ...base.profile, env: { H: '${sandbox:PGHOST}' } } };
      assert.throws(() => buildContainerSpec(withEnv), /^Error: env\.H: \$\{sandbox:PGHOST\} has no value/);
    });

    it('sandboxUserIds is the user the spec runs as', () => {
      for (const defaultUser of [undefined, { uid: 0, gid: 0 }, { uid: 1000, gid: 1001 }]) {
        const spec = buildContainerSpec({
          ...input(),
          ...(defaultUser ? { defaultUser } : { defaultUser: undefined }),
        });
        const ids = sandboxUserIds(input().profile, defaultUser);
        assert.equal(spec.User, `${ids.uid}:${ids.gid}`);
      }
    });
  });
});
