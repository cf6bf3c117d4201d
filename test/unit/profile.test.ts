import { mkdirSync, realpathSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { loadProfile, type LoadProfileOptions, type Profile } from '../../src/profile/load-profile.js';
import { ProfileError, formatFieldPath } from '../../src/profile/profile-problems.js';
import { databaseAdminUrl } from '../../src/database/database-env.js';
import { scratchFolder } from '../support/scratch-folder.js';

/** A fresh folder (real path) with a `home/` that has secrets in it, and a `data/` to mount. */
function sandboxDir(): { dir: string; home: string; data: string } {
  const dir = scratchFolder('hintbox-profile-');
  const home = path.join(dir, 'home');
  mkdirSync(path.join(home, '.ssh'), { recursive: true });
  writeFileSync(path.join(home, '.ssh', 'id_ed25519'), 'secret');
  mkdirSync(path.join(home, 'projects'));
  const data = path.join(dir, 'data');
  mkdirSync(data);
  return { dir, home, data };
}

function write(dir: string, text: string, name = 'server.yaml'): string {
  const file = path.join(dir, name);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, text);
  return file;
}

function load(file: string, options: LoadProfileOptions): Profile {
  return loadProfile(file, options);
}

function escapeRe(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Loads a profile that must fail; checks the message format and returns the error. */
function failing(file: string, options: LoadProfileOptions, { fieldPaths = true } = {}): ProfileError {
  let caught: unknown;
  try {
    load(file, options);
  } catch (error) {
    caught = error;
  }
  assert.ok(caught instanceof ProfileError, `expected a ProfileError, got ${String(caught)}`);
  const lines = caught.message.split('\n');
  assert.equal(lines.length, caught.problems.length, 'one line per problem');
  assert.ok(caught.problems.length > 0, 'caught.problems.length > 0');
  const fieldLine = new RegExp(`^${escapeRe(file)}: [A-Za-z0-9_.\\[\\]-]+: \\S.*$`);
  const anyLine = new RegExp(`^${escapeRe(file)}: \\S.*$`);
  lines.forEach((line, i) => {
    assert.match(line, fieldPaths ? fieldLine : anyLine);
    const p = caught.problems[i]!;
    assert.equal(p.file, file);
    assert.equal(line, p.path ? `${p.file}: ${p.path}: ${p.message}` : `${p.file}: ${p.message}`);
    if (fieldPaths) assert.ok(p.path.length > 0, 'p.path.length > 0');
  });
  return caught;
}

function problemAt(error: ProfileError, at: string | RegExp): { path: string; message: string } {
  const found = error.problems.find((p) => (typeof at === 'string' ? p.path === at : at.test(p.path)));
  assert.ok(found, `a problem at ${String(at)} in:\n${error.message}`);
  return found;
}

const MINIMAL = 'name: files\nserver:\n  image: hintbox/files:1\n';

describe('loadProfile: valid profiles', () => {
  it('fills in the defaults for a minimal profile', () => {
    const { dir, home } = sandboxDir();
    const file = write(dir, MINIMAL);
    const profile = load(file, { vars: {}, home });
    assert.deepEqual(profile, {
      file,
      name: 'files',
      server: { image: 'hintbox/files:1' },
      trust: 'untrusted',
      mounts: [],
      network: 'none',
      env: {},
      limits: { memory: '512m', cpus: 1, pids: 256, tmpfs: '64m' },
      timeouts: { start: 30, call: 600 },
      tools: {},
      tags: [],
      split: true,
      hold: true,
      clients: 'shared',
      preApprove: [],
      approval: { timeout: 120, console: false },
      annotations: 'enforced',
      serverRequests: { sampling: false, elicitation: true, urlElicitation: false, roots: true },
    });
  });

  it("takes annotations: claimed (the server's annotations passed to the client as sent)", () => {
    const { dir, home } = sandboxDir();
    const file = write(dir, `${MINIMAL}annotations: claimed\n`);
    assert.equal(load(file, { vars: {}, home }).annotations, 'claimed');
  });

  it('resolves a relative mount source against the profile folder, with realpath', () => {
    const { dir, home, data } = sandboxDir();
    symlinkSync(data, path.join(dir, 'data-link'));
    const file = write(
      dir,
      MINIMAL +
        'mounts:\n  - source: ../data\n    target: /data\n  - source: ../data-link\n    target: /link\n    mode: ro\n',
      'profiles/server.yaml',
    );
    const profile = load(file, { vars: {}, home });
    assert.notEqual(process.cwd(), path.join(dir, 'profiles'));
    assert.deepEqual(profile.mounts, [
      { source: data, target: '/data', mode: 'rw' },
      { source: data, target: '/link', mode: 'ro' },
    ]);
  });

  it('expands ~ against options.home', () => {
    const { dir, home } = sandboxDir();
    const file = write(dir, MINIMAL + 'mounts:\n  - { source: ~/projects, target: /projects }\n');
    assert.equal(load(file, { vars: {}, home }).mounts[0]!.source, path.join(home, 'projects'));
  });

  it('interpolates ${VAR}, ${VAR:-default} and nested defaults from options.vars only', () => {
    const { dir, home, data } = sandboxDir();
    const file = write(
      dir,
      [
        'name: files',
        'server:',
        '  image: "${IMAGE:-hintbox/files:2}"',
        '  args: ["${WORKSPACE:-${CWD}}", "$${NOT_A_VAR}"]',
        'mounts:',
        '  - source: "${DATA}"',
        '    target: /data',
        'env:',
        '  TOKEN: "${TOKEN}"',
        '',
      ].join('\n'),
    );
    process.env.IMAGE = 'from-process-env:9';
    try {
      const a = load(file, { vars: { CWD: '/cwd', DATA: data, TOKEN: 't0k' }, home });
      assert.equal(a.server.image, 'hintbox/files:2', 'process.env is not consulted when vars are given');
      assert.deepEqual(a.server.args, ['/cwd', '${NOT_A_VAR}']);
      assert.equal(a.mounts[0]!.source, data);
      assert.deepEqual(a.env, { TOKEN: 't0k' });

      const b = load(file, { vars: { IMAGE: 'img:3', WORKSPACE: '/ws', CWD: '/cwd', DATA: data, TOKEN: 'x' }, home });
      assert.equal(b.server.image, 'img:3');
      assert.deepEqual(b.server.args, ['/ws', '${NOT_A_VAR}']);
    } finally {
      delete process.env.IMAGE;
    }
  });

  it('resolves server.build to an absolute folder that has a Dockerfile', () => {
    const { dir, home } = sandboxDir();
    mkdirSync(path.join(dir, 'image'));
    writeFileSync(path.join(dir, 'image', 'Dockerfile'), 'FROM scratch\n');
    const file = write(dir, MINIMAL + '  build: ./image\n');
    assert.equal(load(file, { vars: {}, home }).server.build, path.join(dir, 'image'));
  });

  it('accepts tool overrides and a non-root user', () => {
    const { dir, home } = sandboxDir();
    const file = write(
      dir,
      MINIMAL +
        '  user: "1000:1000"\nsplit: false\nnetwork: open\ntrust: trusted\ntools:\n  read_file:\n    annotations: { readOnlyHint: false }\n    tags: [fs]\n',
    );
    const p = load(file, { vars: {}, home });
    assert.equal(p.server.user, '1000:1000');
    assert.equal(p.split, false);
    assert.equal(p.network, 'open');
    assert.equal(p.trust, 'trusted');
    assert.deepEqual(p.tools, { read_file: { annotations: { readOnlyHint: false }, tags: ['fs'] } });
  });
});

describe('loadProfile: errors name the file and the field', () => {
  it('a missing file', () => {
    const { dir, home } = sandboxDir();
    const file = path.join(dir, 'nope.yaml');
    const error = failing(file, { vars: {}, home }, { fieldPaths: false });
    assert.equal(error.problems.length, 1);
    assert.match(error.message, /nope\.yaml: no such file \(/);
  });

  it('invalid YAML', () => {
    const { dir, home } = sandboxDir();
    const file = write(dir, 'name: files\nserver: [image: x\n');
    const error = failing(file, { vars: {}, home }, { fieldPaths: false });
    assert.match(error.message, /invalid YAML/);
  });

  it('duplicate YAML keys', () => {
    const { dir, home } = sandboxDir();
    const file = write(dir, MINIMAL + 'network: none\nnetwork: open\n');
    const error = failing(file, { vars: {}, home }, { fieldPaths: false });
    assert.match(error.message, /invalid YAML/);
  });

  it('a YAML document that is not a mapping', () => {
    const { dir, home } = sandboxDir();
    for (const text of ['- a\n- b\n', 'just a string\n', '']) {
      const file = write(dir, text);
      failing(file, { vars: {}, home }, { fieldPaths: false });
    }
  });

  it('an unknown key at the top level', () => {
    const { dir, home } = sandboxDir();
    const file = write(dir, MINIMAL + 'netwrok: open\n');
    const error = failing(file, { vars: {}, home }, { fieldPaths: false });
    assert.equal(error.problems.length, 1);
    assert.match(error.problems[0]!.message, /unknown key/);
    assert.match(error.message, /netwrok/);
  });

  it('unknown keys nested in objects', () => {
    const { dir, home } = sandboxDir();
    const file = write(
      dir,
      MINIMAL +
        '  entrypoint: [sh]\nlimits:\n  memory: 1g\n  swap: 2g\nmounts:\n  - { source: ., target: /d, readonly: true }\n',
    );
    const error = failing(file, { vars: {}, home });
    const limits = problemAt(error, /^limits(\.swap)?$/);
    assert.match(limits.message, /unknown key/);
    assert.match(
      error.message.split('\n').find((l) => l.includes(': limits'))!,
      /swap/,
    );
    assert.match(problemAt(error, /^server(\.entrypoint)?$/).message, /unknown key/);
    assert.match(problemAt(error, /^mounts\[0\](\.readonly)?$/).message, /unknown key/);
    assert.ok(error.problems.length >= 3, 'error.problems.length >= 3');
  });

  it('wrong types', () => {
    const { dir, home } = sandboxDir();
    const file = write(
      dir,
      [
        'name: files',
        'server: { image: 7, args: x }',
        'network: maybe',
        'split: "yes"',
        'limits: { cpus: two, pids: 3 }',
        'timeouts: { call: -1 }',
        'tags: [""]',
        'tools: { t: { annotations: { readOnlyHint: "yes" } } }',
        'env: { FOO: 3 }',
        '',
      ].join('\n'),
    );
    const error = failing(file, { vars: {}, home });
    for (const at of [
      'server.image',
      'server.args',
      'network',
      'split',
      'limits.cpus',
      'limits.pids',
      'timeouts.call',
      'tags[0]',
      'tools.t.annotations.readOnlyHint',
      'env.FOO',
    ]) {
      problemAt(error, at);
    }
  });

  // proves: OPERATOR-OUT-OF-REACH
  it('refuses a profile that lies inside a mount its server may write', () => {
    const { dir, home, data } = sandboxDir();
    const inside = write(data, `${MINIMAL}mounts:\n  - source: .\n    target: /data\n`, 'profile.yaml');
    const error = failing(inside, { vars: {}, home, ownPaths: [] });
    assert.equal(error.problems.length, 1);
    assert.match(
      problemAt(error, 'mounts[0].source').message,
      /may be written by the server and holds the profile file \(.*\) and the lock file of approved definitions \(.*profile\.lock\.json\)/,
    );
    // Read-only for every tool: the server cannot rewrite it.
    const readOnly = write(data, `${MINIMAL}mounts:\n  - source: .\n    target: /data\n    mode: ro\n`, 'ro.yaml');
    assert.equal(load(readOnly, { vars: {}, home, ownPaths: [] }).mounts[0]?.mode, 'ro');
    // Its lock file mounted alone, writable: the server could approve itself.
    writeFileSync(path.join(dir, 'lk.lock.json'), '{}');
    const lockMounted = write(dir, `${MINIMAL}mounts:\n  - source: lk.lock.json\n    target: /l\n`, 'lk.yaml');
    assert.match(
      problemAt(failing(lockMounted, { vars: {}, home, ownPaths: [] }), 'mounts[0].source').message,
      /holds the lock file of approved definitions/,
    );
    // Beside the mount, not in it: fine.
    const beside = write(dir, `${MINIMAL}mounts:\n  - source: data\n    target: /data\n`, 'beside.yaml');
    assert.equal(load(beside, { vars: {}, home, ownPaths: [] }).mounts.length, 1);
  });

  // proves: OPERATOR-OUT-OF-REACH
  it('refuses a profile reached through a symlink that lies inside a mount its server may write', () => {
    const { dir, home, data } = sandboxDir();
    const real = write(dir, `${MINIMAL}mounts:\n  - source: ${data}\n    target: /data\n`, 'real/profile.yaml');
    // The link in the mount: the server could point it at a profile of its own.
    symlinkSync(real, path.join(data, 'hintbox.yaml'));
    const viaLink = failing(path.join(data, 'hintbox.yaml'), { vars: {}, home, ownPaths: [] });
    assert.match(
      problemAt(viaLink, 'mounts[0].source').message,
      new RegExp(
        `holds the profile file \\(${escapeRe(path.join(data, 'hintbox.yaml'))}, on the way to ${escapeRe(real)}\\)`,
      ),
    );
    // A folder link in the mount on the way to it: the same.
    symlinkSync(path.dirname(real), path.join(data, 'profiles'));
    const viaFolder = failing(path.join(data, 'profiles', 'profile.yaml'), { vars: {}, home, ownPaths: [] });
    assert.match(problemAt(viaFolder, 'mounts[0].source').message, /on the way to/);
    // Loaded by its own path, nothing in the mount decides what it is.
    assert.equal(load(real, { vars: {}, home, ownPaths: [] }).mounts.length, 1);
  });

  // proves: OPERATOR-OUT-OF-REACH
  it("refuses a writable mount that holds or lies inside the server's build folder", () => {
    const { dir, home, data } = sandboxDir();
    writeFileSync(path.join(data, 'Dockerfile'), 'FROM scratch\n');
    mkdirSync(path.join(data, 'src'));
    for (const source of ['data', 'data/src']) {
      const file = write(dir, `${MINIMAL}  build: data\nmounts:\n  - source: ${source}\n    target: /w\n`, 'p.yaml');
      assert.match(
        problemAt(failing(file, { vars: {}, home, ownPaths: [] }), 'mounts[0].source').message,
        /holds the server's build folder/,
        source,
      );
    }
  });

  // proves: OPERATOR-OUT-OF-REACH
  it("refuses to mount hintbox's own state folder or installation, even read-only", () => {
    const { dir, home, data } = sandboxDir();
    const state = path.join(data, 'state');
    mkdirSync(state);
    const ownPaths = [{ path: state, what: "hintbox's state folder" }];
    for (const [source, mode] of [
      ['data', 'ro'],
      ['data/state', 'ro'],
      ['data/state/sub-not-yet-made', 'rw'],
    ] as const) {
      const file = write(
        dir,
        `${MINIMAL}mounts:\n  - source: ${source}\n    target: /w\n    mode: ${mode}\n`,
        'p.yaml',
      );
      if (source.endsWith('not-yet-made')) mkdirSync(path.join(dir, source));
      assert.match(
        problemAt(failing(file, { vars: {}, home, ownPaths }), 'mounts[0].source').message,
        /denylist/,
        source,
      );
    }
  });

  // proves: OPERATOR-OUT-OF-REACH
  it("refuses to mount hintbox's temporary folder, what holds it, or a socket or preview folder in it; not the rest of it", () => {
    const { dir, home, data } = sandboxDir();
    const temp = path.join(data, 'tmp');
    for (const sub of ['hintbox-io-abc', 'hintbox-preview-1-x', 'workspace'])
      mkdirSync(path.join(temp, sub), { recursive: true });
    const ownPaths = [{ path: temp, what: "hintbox's temporary folder", onlyOwn: ['hintbox-io-', 'hintbox-preview-'] }];
    const mounting = (source: string) =>
      write(
        dir,
        `${MINIMAL}mounts:\n  - source: ${source}\n    target: /w\n    mode: ro\n`,
        `m${source.replace(/\W/g, '-')}.yaml`,
      );
    for (const [source, reason] of [
      ['data/tmp', /contains .*hintbox's temporary folder/],
      ['data', /contains .*hintbox's temporary folder/],
      ['data/tmp/hintbox-io-abc', /a folder of hintbox's \(sandbox sockets or preview copies\)/],
      ['data/tmp/hintbox-preview-1-x', /a folder of hintbox's/],
    ] as const) {
      assert.match(
        problemAt(failing(mounting(source), { vars: {}, home, ownPaths }), 'mounts[0].source').message,
        reason,
        source,
      );
    }
    // A workspace of the operator's in the temporary folder is theirs to mount.
    const profile = loadProfile(mounting('data/tmp/workspace'), { vars: {}, home, ownPaths });
    assert.equal(profile.mounts[0]?.source, path.join(realpathSync(temp), 'workspace'));
  });

  // proves: HELD-UNTIL-CALLED
  it('refuses hold: false for a server that is not trusted', () => {
    const { dir, home } = sandboxDir();
    const file = write(dir, `${MINIMAL}hold: false\n`);
    const error = failing(file, { vars: {}, home });
    assert.equal(error.problems.length, 1);
    assert.match(problemAt(error, 'hold').message, /only for a trusted server/);
    const trusted = write(dir, `${MINIMAL}hold: false\ntrust: trusted\n`, 'trusted.yaml');
    assert.equal(load(trusted, { vars: {}, home }).hold, false);
  });

  // proves: TRUST-KEYS-HAVE-EFFECT
  it('refuses at load a tool rule approval: allow on an untrusted profile, in one line saying why', () => {
    const { dir, home } = sandboxDir();
    const file = write(dir, `${MINIMAL}tools:\n  read_file: { approval: allow }\n`);
    const error = failing(file, { vars: {}, home });
    assert.equal(error.problems.length, 1);
    assert.match(
      problemAt(error, 'tools.read_file.approval').message,
      /^allow has no effect here: every call of an untrusted server is confirmed by a person/,
    );
    const trusted = write(dir, `${MINIMAL}trust: trusted\ntools:\n  read_file: { approval: allow }\n`, 't.yaml');
    assert.equal(load(trusted, { vars: {}, home }).tools['read_file']?.approval, 'allow');
  });

  it('a bad name', () => {
    const { dir, home } = sandboxDir();
    for (const name of ['My Server', '-lead', 'a'.repeat(64), '"a/b"', '""']) {
      const file = write(dir, `name: ${name}\nserver: { image: x }\n`);
      const error = failing(file, { vars: {}, home });
      assert.equal(error.problems.length, 1, name);
      problemAt(error, 'name');
    }
  });

  // proves: CONFIRMATION-OWN
  it('the name hintbox, which signs its own confirmations', () => {
    const { dir, home } = sandboxDir();
    const file = write(dir, 'name: hintbox\nserver: { image: x }\n');
    const error = failing(file, { vars: {}, home });
    assert.equal(error.problems.length, 1);
    assert.match(problemAt(error, 'name').message, /reserved/);
  });

  it('annotations other than enforced or claimed, in one line', () => {
    const { dir, home } = sandboxDir();
    for (const value of ['honest', 'true', '{ readOnlyHint: true }']) {
      const file = write(dir, `${MINIMAL}annotations: ${value}\n`);
      const error = failing(file, { vars: {}, home });
      assert.equal(error.problems.length, 1, value);
      assert.match(problemAt(error, 'annotations').message, /enforced.*claimed/);
    }
  });

  it('a missing name and server', () => {
    const { dir, home } = sandboxDir();
    const file = write(dir, 'trust: trusted\n');
    const error = failing(file, { vars: {}, home });
    problemAt(error, 'name');
    problemAt(error, 'server');
  });

  it('bad mount targets', () => {
    const { dir, home } = sandboxDir();
    for (const target of ['data', './data', '/', '""']) {
      const file = write(dir, MINIMAL + `mounts:\n  - { source: ./data, target: ${target} }\n`);
      const error = failing(file, { vars: {}, home });
      assert.match(problemAt(error, 'mounts[0].target').message, /absolute|other than \//, target);
    }
  });

  it('a mount target that normalizes to / is refused', () => {
    const { dir, home } = sandboxDir();
    for (const target of ['"//"', '"/."', '/data/..']) {
      const file = write(dir, MINIMAL + `mounts:\n  - { source: ./data, target: ${target} }\n`);
      const error = failing(file, { vars: {}, home });
      problemAt(error, 'mounts[0].target');
    }
  });

  it('duplicate mount targets', () => {
    const { dir, home } = sandboxDir();
    const file = write(
      dir,
      MINIMAL +
        'mounts:\n  - { source: ./data, target: /d }\n  - { source: ./home/projects, target: /e }\n  - { source: ./data, target: /e/../d }\n',
    );
    const error = failing(file, { vars: {}, home });
    assert.equal(error.problems.length, 1);
    assert.match(problemAt(error, 'mounts[2].target').message, /mounts\[0\]/);
  });

  it('duplicate mount targets that differ by a trailing slash', () => {
    const { dir, home } = sandboxDir();
    const file = write(
      dir,
      MINIMAL + 'mounts:\n  - { source: ./data, target: /d }\n  - { source: ./data, target: /d/ }\n',
    );
    const error = failing(file, { vars: {}, home });
    problemAt(error, 'mounts[1].target');
  });

  it('bad sizes', () => {
    const { dir, home } = sandboxDir();
    const file = write(dir, MINIMAL + 'limits: { memory: 5 gigs, tmpfs: 1t }\n');
    const error = failing(file, { vars: {}, home });
    assert.equal(error.problems.length, 2);
    assert.match(problemAt(error, 'limits.memory').message, /size/);
    assert.match(problemAt(error, 'limits.tmpfs').message, /size/);
  });

  // proves: NO-ROOT
  it('a root or non-numeric user', () => {
    const { dir, home } = sandboxDir();
    for (const user of ['"0"', '"0:0"', '"000:1000"', 'root', '"1000:"']) {
      const file = write(dir, MINIMAL + `  user: ${user}\n`);
      const error = failing(file, { vars: {}, home });
      assert.equal(error.problems.length, 1, user);
      assert.match(problemAt(error, 'server.user').message, /uid/, user);
    }
    for (const user of ['"0"', '"0:0"']) {
      const file = write(dir, MINIMAL + `  user: ${user}\n`);
      assert.match(problemAt(failing(file, { vars: {}, home }), 'server.user').message, /root|not 0/);
    }
  });

  it('a ${VAR} that is not set and has no default names the field and the variable', () => {
    const { dir, home } = sandboxDir();
    const file = write(
      dir,
      'name: files\nserver:\n  image: "${IMAGE}"\nenv:\n  A: "${API_KEY}"\n  B: "${SET:-${ALSO_MISSING}}"\n',
    );
    const error = failing(file, { vars: { UNRELATED: 'x' }, home });
    assert.equal(error.problems.length, 3);
    assert.match(problemAt(error, 'server.image').message, /IMAGE/);
    assert.match(problemAt(error, 'env.A').message, /API_KEY/);
    assert.match(problemAt(error, 'env.B').message, /ALSO_MISSING/);
  });

  it('an unclosed ${', () => {
    const { dir, home } = sandboxDir();
    const file = write(dir, 'name: files\nserver:\n  image: "${IMAGE"\n');
    assert.match(problemAt(failing(file, { vars: {}, home }), 'server.image').message, /unclosed/);
  });

  it('a mount source that does not exist', () => {
    const { dir, home } = sandboxDir();
    const file = write(dir, MINIMAL + 'mounts:\n  - { source: ./missing, target: /m }\n');
    const error = failing(file, { vars: {}, home });
    assert.match(problemAt(error, 'mounts[0].source').message, /missing.*does not exist/);
  });

  // proves: DENYLIST
  it('a mount source that is a symlink to /etc', () => {
    const { dir, home } = sandboxDir();
    symlinkSync('/etc', path.join(dir, 'innocent'));
    const file = write(dir, MINIMAL + 'mounts:\n  - { source: ./innocent, target: /m, mode: ro }\n');
    const error = failing(file, { vars: {}, home });
    assert.match(problemAt(error, 'mounts[0].source').message, /\/etc.*denylist/);
  });

  it('a mount source inside a denied path', () => {
    const { dir, home } = sandboxDir();
    const file = write(
      dir,
      MINIMAL + 'mounts:\n  - { source: /etc/ssl, target: /m, mode: ro }\n  - { source: ~/.ssh, target: /k }\n',
    );
    const error = failing(file, { vars: {}, home });
    assert.match(problemAt(error, 'mounts[0].source').message, /denylist/);
    assert.match(problemAt(error, 'mounts[1].source').message, /\.ssh.*denylist/);
  });

  it('a mount source of /', () => {
    const { dir, home } = sandboxDir();
    const file = write(dir, MINIMAL + 'mounts:\n  - { source: /, target: /host, mode: ro }\n');
    assert.match(problemAt(failing(file, { vars: {}, home }), 'mounts[0].source').message, /denylist/);
  });

  // proves: DENYLIST
  it('a mount source that is the home folder (it contains ~/.ssh)', () => {
    const { dir, home } = sandboxDir();
    for (const source of [home, '"~"', '"~/"']) {
      const file = write(dir, MINIMAL + `mounts:\n  - { source: ${source}, target: /home-of-user, mode: ro }\n`);
      const error = failing(file, { vars: {}, home });
      assert.match(
        problemAt(error, 'mounts[0].source').message,
        new RegExp(`${escapeRe(path.join(home, '.ssh'))}.*denylist`),
        source,
      );
    }
  });

  it('server.build without a Dockerfile', () => {
    const { dir, home } = sandboxDir();
    mkdirSync(path.join(dir, 'image'));
    const file = write(dir, MINIMAL + '  build: ./image\n');
    const error = failing(file, { vars: {}, home });
    assert.match(problemAt(error, 'server.build').message, /Dockerfile/);
  });

  it('lists every problem of a profile, one line each', () => {
    const { dir, home } = sandboxDir();
    const file = write(
      dir,
      'name: Bad Name\nserver: { image: x, user: "0" }\nnetwork: wide\nlimits: { memory: lots }\n',
    );
    const error = failing(file, { vars: {}, home });
    assert.equal(error.problems.length, 4);
    assert.equal(error.message.split('\n').length, 4);
    for (const at of ['name', 'server.user', 'network', 'limits.memory']) problemAt(error, at);
  });

  it('lists every path problem together', () => {
    const { dir, home } = sandboxDir();
    mkdirSync(path.join(dir, 'image'));
    const file = write(
      dir,
      MINIMAL +
        '  build: ./image\nmounts:\n  - { source: ./missing, target: /a }\n  - { source: /proc, target: /b }\n  - { source: ./data, target: /a }\n',
    );
    const error = failing(file, { vars: {}, home });
    assert.equal(error.problems.length, 4, error.message);
    for (const at of ['mounts[0].source', 'mounts[1].source', 'mounts[2].target', 'server.build']) problemAt(error, at);
  });

  it('lists problems of different kinds together (interpolation, schema, paths)', () => {
    const { dir, home } = sandboxDir();
    const a = write(dir, 'name: files\nserver: { image: "${IMAGE}" }\nnetwork: wide\n', 'a.yaml');
    const errorA = failing(a, { vars: {}, home });
    problemAt(errorA, 'server.image');
    problemAt(errorA, 'network');
    const b = write(
      dir,
      'name: files\nserver: { image: x }\nnetwork: wide\nmounts:\n  - { source: ./missing, target: /a }\n',
      'b.yaml',
    );
    const errorB = failing(b, { vars: {}, home });
    problemAt(errorB, 'network');
    problemAt(errorB, 'mounts[0].source');
  });
});

describe('profile serverRequests', () => {
  const withSection = (dir: string, lines: string[], trust = 'untrusted'): string =>
    write(dir, [MINIMAL.trimEnd(), `trust: ${trust}`, ...lines, ''].join('\n'));

  it('defaults: an untrusted server may elicit and ask for roots, not sample; a trusted one may sample too', () => {
    const { dir, home } = sandboxDir();
    assert.deepEqual(load(withSection(dir, []), { vars: {}, home }).serverRequests, {
      sampling: false,
      elicitation: true,
      urlElicitation: false,
      roots: true,
    });
    assert.deepEqual(load(withSection(dir, [], 'trusted'), { vars: {}, home }).serverRequests, {
      sampling: true,
      elicitation: true,
      urlElicitation: true,
      roots: true,
    });
    // A section that names one feature leaves the others at their defaults.
    assert.deepEqual(
      load(withSection(dir, ['serverRequests: { roots: false }'], 'trusted'), { vars: {}, home }).serverRequests,
      {
        sampling: true,
        elicitation: true,
        urlElicitation: true,
        roots: false,
      },
    );
  });

  it('keeps explicit values, also against the trust default', () => {
    const { dir, home } = sandboxDir();
    const explicit = (trust: string, text: string) =>
      load(withSection(dir, [`serverRequests: ${text}`], trust), { vars: {}, home }).serverRequests;
    assert.deepEqual(
      explicit('untrusted', '{ sampling: true, elicitation: false, urlElicitation: true, roots: false }'),
      {
        sampling: true,
        elicitation: false,
        urlElicitation: true,
        roots: false,
      },
    );
    assert.deepEqual(explicit('trusted', '{ sampling: false, urlElicitation: false }'), {
      sampling: false,
      elicitation: true,
      urlElicitation: false,
      roots: true,
    });
    assert.deepEqual(explicit('untrusted', '{}'), {
      sampling: false,
      elicitation: true,
      urlElicitation: false,
      roots: true,
    });
  });

  it('refuses an unknown key and values that are not booleans, naming the field', () => {
    const { dir, home } = sandboxDir();
    const error = failing(
      withSection(dir, ['serverRequests: { sampling: "yes", elicitation: 1, roots: null, tasks: true }']),
      { vars: {}, home },
    );
    for (const at of ['serverRequests.sampling', 'serverRequests.elicitation', 'serverRequests.roots']) {
      assert.match(problemAt(error, at).message, /boolean/, at);
    }
    assert.equal(problemAt(error, 'serverRequests.tasks').message, 'unknown key');
    assert.equal(error.problems.length, 4, 'every problem at once');
    const list = failing(withSection(dir, ['serverRequests: [sampling]']), { vars: {}, home });
    problemAt(list, 'serverRequests');
    const word = failing(withSection(dir, ['serverRequests: none']), { vars: {}, home });
    problemAt(word, 'serverRequests');
  });
});

describe('formatFieldPath', () => {
  it('joins keys with dots and indexes with brackets', () => {
    assert.equal(formatFieldPath(['mounts', 0, 'source']), 'mounts[0].source');
    assert.equal(formatFieldPath(['limits']), 'limits');
    assert.equal(formatFieldPath([]), '');
    assert.equal(formatFieldPath([0, 'a', 1, 2]), '[0].a[1][2]');
  });
});

describe('profile database section', () => {
  const DB = `${MINIMAL}database:\n  adminUrlEnv: SHOP_PG_ADMIN\n  database: shop\n  schemas: [app]\n  privilege: append\n`;

  it('is optional, and validated with its defaults filled in', () => {
    const { dir, home } = sandboxDir();
    assert.equal(load(write(dir, MINIMAL), { vars: {}, home }).database, undefined);
    const profile = load(write(dir, DB), { vars: {}, home });
    assert.deepEqual(profile.database, {
      adminUrlEnv: 'SHOP_PG_ADMIN',
      database: 'shop',
      schemas: ['app'],
      privilege: 'append',
      roleTtlMinutes: 480,
      connectionLimit: 10,
    });
  });

  it('refuses a URL written in the profile and a bad privilege, one line each with the field', () => {
    const { dir, home } = sandboxDir();
    const bad = `${MINIMAL}database:\n  adminUrlEnv: "postgresql://admin:secret@db/shop"\n  database: shop\n  schemas: [app]\n  privilege: all\n`;
    const error = failing(write(dir, bad), { vars: {}, home });
    assert.match(problemAt(error, 'database.adminUrlEnv').message, /must not be written in the profile/);
    assert.ok(problemAt(error, 'database.privilege'), 'the privilege is named');
  });

  it('keeps ${sandbox:…} in server.args and env for the sandbox, never from the host', () => {
    const { dir, home } = sandboxDir();
    const file = write(
      dir,
      DB.replace(
        '  image: hintbox/files:1\n',
        '  image: hintbox/files:1\n  args: ["--db", "${sandbox:DATABASE_URL}"]\n',
      ) + 'env:\n  PG_URL: "${sandbox:DATABASE_URL}"\n  WHO: "${sandbox:PGUSER}@${HOST_NAME}"\n',
    );
    const profile = load(file, { vars: { DATABASE_URL: 'postgresql://host:secret@db/x', HOST_NAME: 'h' }, home });
    assert.deepEqual(profile.server.args, ['--db', '${sandbox:DATABASE_URL}']);
    assert.deepEqual(profile.env, { PG_URL: '${sandbox:DATABASE_URL}', WHO: '${sandbox:PGUSER}@h' });
  });

  it('refuses ${sandbox:…} without a database section, with an unknown name, or outside args and env: one line each', () => {
    const { dir, home } = sandboxDir();
    const noDb = failing(
      write(dir, MINIMAL + '  args: ["${sandbox:DATABASE_URL}"]\nenv:\n  H: "${sandbox:PGHOST}"\n'),
      {
        vars: {},
        home,
      },
    );
    assert.match(problemAt(noDb, 'server.args[0]').message, /DATABASE_URL\} needs a database section/);
    assert.match(problemAt(noDb, 'env.H').message, /PGHOST\} needs a database section/);
    const unknown = failing(write(dir, DB + 'env:\n  H: "${sandbox:HOME}"\n'), { vars: {}, home });
    assert.match(problemAt(unknown, 'env.H').message, /unknown sandbox value/);
    const unknownNoDb = failing(write(dir, MINIMAL + 'env:\n  H: "${sandbox:HOME}"\n'), { vars: {}, home });
    assert.deepEqual(
      unknownNoDb.problems.map((p) => p.path),
      ['env.H'],
      'one line for the field',
    );
    const elsewhere = failing(write(dir, DB.replace('hintbox/files:1', '"${sandbox:PGHOST}"')), { vars: {}, home });
    assert.match(problemAt(elsewhere, 'server.image').message, /only allowed in server.args and env/);
  });

  it('keeps ${sandbox:mount.NAME} for a named mount (no database needed), never from the host', () => {
    const { dir, home } = sandboxDir();
    const file = write(
      dir,
      MINIMAL +
        '  args: ["${sandbox:mount.work}", "--ref=${sandbox:mount.ref}"]\n' +
        'mounts:\n  - { name: work, source: ./data, target: /projects/work }\n  - { name: ref, source: ./data, target: /ref, mode: ro }\n' +
        'env:\n  ROOT: "${sandbox:mount.work}"\n',
    );
    const profile = load(file, { vars: { 'mount.work': '/host/leak' }, home });
    assert.deepEqual(profile.server.args, ['${sandbox:mount.work}', '--ref=${sandbox:mount.ref}']);
    assert.deepEqual(profile.env, { ROOT: '${sandbox:mount.work}' });
    assert.deepEqual(
      profile.mounts.map((m) => m.name),
      ['work', 'ref'],
    );
  });

  it('refuses ${sandbox:mount.NAME} naming no mount, and two mounts of one name: one line each', () => {
    const { dir, home } = sandboxDir();
    const unknown = failing(
      write(
        dir,
        MINIMAL + '  args: ["${sandbox:mount.wrok}"]\nmounts:\n  - { name: work, source: ./data, target: /work }\n',
      ),
      { vars: {}, home },
    );
    assert.equal(unknown.problems.length, 1, unknown.message);
    assert.match(problemAt(unknown, 'server.args[0]').message, /no mount is named "wrok" \(named: work\)/);
    const same = failing(
      write(
        dir,
        MINIMAL +
          'mounts:\n  - { name: work, source: ./data, target: /a }\n  - { name: work, source: ./data, target: /b }\n',
      ),
      { vars: {}, home },
    );
    assert.match(problemAt(same, 'mounts[1].name').message, /same name as mounts\[0\]/);
    const badName = failing(write(dir, MINIMAL + 'mounts:\n  - { name: "My Work", source: ./data, target: /a }\n'), {
      vars: {},
      home,
    });
    assert.ok(problemAt(badName, 'mounts[0].name'));
  });

  it('reads the admin URL from the named variable, and reports a missing one with file and field, never a value', () => {
    const { dir, home } = sandboxDir();
    const profile = load(write(dir, DB), { vars: {}, home });
    const section = { file: profile.file, database: profile.database! };
    assert.equal(databaseAdminUrl(section, { SHOP_PG_ADMIN: 'postgresql://a:b@h/shop' }), 'postgresql://a:b@h/shop');
    assert.throws(
      () => databaseAdminUrl(section, { OTHER: 'postgresql://a:b@h/shop' }),
      (error: unknown) =>
        error instanceof ProfileError &&
        error.message === `${profile.file}: database.adminUrlEnv: environment variable SHOP_PG_ADMIN is not set`,
    );
  });
});
