import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { stringify } from 'yaml';
import { deniedHostPaths, denyReason } from '../../src/profile/host-path-denylist.js';
import { loadProfile } from '../../src/profile/load-profile.js';
import { ProfileError } from '../../src/profile/profile-problems.js';
import { checkSensitive, SENSITIVE_NAMES, sensitivePlaces } from '../../src/profile/sensitive-paths.js';
import { scratchFolder } from '../support/scratch-folder.js';

const HOME = '/home/alice';

describe('host path denylist', () => {
  it('lists the system paths and the secrets under the given home', () => {
    const denied = deniedHostPaths(HOME);
    for (const p of ['/var/run/docker.sock', '/run/docker.sock', '/proc', '/sys', '/dev', '/etc', '/var/lib/docker']) {
      assert.ok(denied.includes(p), p);
    }
    for (const s of ['.ssh', '.aws', '.docker', '.gnupg', '.kube']) assert.ok(denied.includes(`${HOME}/${s}`), s);
    assert.equal(new Set(denied).size, denied.length);
  });

  // proves: DENYLIST
  it('refuses a denied path, anything inside one, and anything that contains one', () => {
    const cases: Array<[string, RegExp]> = [
      ['/etc', /\/etc is on the denylist/],
      ['/etc/', /on the denylist/],
      ['/etc/ssl/certs', /inside \/etc/],
      ['/var/run/docker.sock', /denylist/],
      ['/var/run', /contains \/var\/run\/docker\.sock/],
      ['/', /contains/],
      ['/proc/self', /inside \/proc/],
      [`${HOME}/.ssh`, /denylist/],
      [`${HOME}/.ssh/id_rsa`, /inside/],
      [`${HOME}/.config/gcloud/creds`, /inside/],
      [HOME, /contains \/home\/alice\/\.ssh/],
      ['/home', /contains/],
      [`${HOME}/projects/../.aws`, /denylist/],
    ];
    for (const [source, reason] of cases) {
      const got = denyReason(source, HOME);
      assert.ok(got, `${source} is refused`);
      assert.match(got, reason, source);
    }
  });

  it('allows ordinary folders, including look-alike names', () => {
    for (const source of [
      `${HOME}/projects`,
      `${HOME}/.sshfoo`,
      '/etcetera',
      '/srv/data',
      '/devices',
      '/tmp/x',
      '/var/lib/dockerish',
      `${HOME}/.config`.concat('/app'),
    ]) {
      assert.equal(denyReason(source, HOME), undefined, source);
    }
  });

  it('uses the given home, not the process one', () => {
    assert.match(denyReason('/home/bob/.ssh', '/home/bob') ?? '', /denylist/);
    assert.equal(denyReason('/home/bob/.ssh', HOME), undefined);
  });

  it('refuses a path inside a denied folder whose name starts with two dots', () => {
    assert.ok(denyReason('/etc/..hidden', HOME), "denyReason('/etc/..hidden', HOME)");
    assert.ok(denyReason(`${HOME}/.ssh/..keys`, HOME), 'denyReason(`${HOME}/.ssh/..keys`, HOME)');
  });
});

/** The names the brief of issue 28 asks for at least, besides the shell files hintbox adds. */
const SENSITIVE_HOME = [
  '.bashrc',
  '.profile',
  '.zshrc',
  '.bash_profile',
  '.bash_login',
  '.bash_logout',
  '.zprofile',
  '.zshenv',
  '.config/gh',
  '.config/hub',
  '.git-credentials',
  '.gitconfig',
  '.config/git',
  '.npmrc',
  '.pypirc',
  '.cargo/credentials',
  '.cargo/credentials.toml',
  '.local/share/keyrings',
  '.password-store',
  // What a review found missing: start-up files of sessions, editors and PATH.
  '.local/share/systemd',
  '.config/environment.d',
  '.pam_environment',
  '.xprofile',
  '.xsessionrc',
  '.local/bin',
  'bin',
  '.vimrc',
  '.config/nvim',
  '.tmux.conf',
  '.config/pip',
];

describe('sensitive host paths: shell start-up files, credential stores, agent sockets', () => {
  const VARS = {
    SSH_AUTH_SOCK: '/tmp/ssh-XYZ/agent.42',
    GPG_AGENT_INFO: '/var/gpg/S.gpg-agent:123:1',
    XDG_RUNTIME_DIR: '/run/user/1000',
  };
  const places = sensitivePlaces([HOME], VARS);

  // proves: DENYLIST
  it('each home entry is refused as the file itself and as its parent folder, unless the mount names it', () => {
    for (const name of SENSITIVE_HOME) {
      assert.ok(SENSITIVE_NAMES.includes(name), name);
      const file = `${HOME}/${name}`;
      const own = checkSensitive([file], places);
      assert.match(own.refused ?? '', new RegExp(`is .*allowSensitive: \\["${name.replace(/\./g, '\\.')}"\\]`), file);
      assert.match(checkSensitive([`${file}/inner`], places).refused ?? '', /is inside/, `${file}/inner`);
      const parent = path.dirname(file);
      // The home folder itself is on the hard denylist (it holds ~/.ssh); its sub-folders hold these.
      if (parent !== HOME) assert.match(checkSensitive([parent], places).refused ?? '', /contains/, parent);
      assert.deepEqual(checkSensitive([file], places, [name]), { unused: [], touched: [name] }, `${name} opted in`);
    }
  });

  it('the home folder holds every one: each must be named, a look-alike or a sibling is not touched', () => {
    const all = checkSensitive([HOME], places);
    for (const name of SENSITIVE_HOME) assert.ok(all.touched.includes(name), name);
    assert.ok(all.refused);
    assert.ok(checkSensitive([HOME], places, ['.bashrc']).refused, 'one name does not open the rest');
    for (const fine of [`${HOME}/projects`, `${HOME}/.bashrc.d`, `${HOME}/.config/ghost`, `${HOME}/.cargo/registry`])
      assert.deepEqual(checkSensitive([fine], places), { unused: [], touched: [] }, fine);
  });

  // proves: DENYLIST
  it('agent sockets: the socket SSH_AUTH_SOCK and GPG_AGENT_INFO point to, the runtime folders, and their parents', () => {
    const cases: Array<[string, string]> = [
      ['/tmp/ssh-XYZ/agent.42', 'SSH_AUTH_SOCK'],
      ['/tmp/ssh-XYZ', 'SSH_AUTH_SOCK'],
      ['/tmp', 'SSH_AUTH_SOCK'],
      ['/var/gpg/S.gpg-agent', 'GPG_AGENT_INFO'],
      ['/run/user/1000', 'XDG_RUNTIME_DIR'],
      ['/run/user/1000/gnupg/S.gpg-agent', 'XDG_RUNTIME_DIR'],
      ['/run/user/1000/keyring/ssh', 'XDG_RUNTIME_DIR'],
      ['/run/user/1001/ssh-agent.socket', '/run/user'],
    ];
    for (const [source, name] of cases) {
      const check = checkSensitive([source], places);
      assert.ok(check.touched.includes(name), `${source} touches ${name}`);
      assert.ok(check.refused, source);
      assert.equal(checkSensitive([source], places, check.touched).refused, undefined, `${source} opted in`);
    }
    assert.deepEqual(checkSensitive(['/tmp/project'], places).touched, []);
    assert.ok(!sensitivePlaces([HOME], {}).some((p) => p.name === 'SSH_AUTH_SOCK'), 'unset: no place');
    assert.ok(!sensitivePlaces([HOME], { SSH_AUTH_SOCK: 'relative' }).some((p) => p.name === 'SSH_AUTH_SOCK'));
  });

  it('a name the mount does not hold is reported: the opt-in lists exactly what the mount holds', () => {
    assert.deepEqual(checkSensitive([`${HOME}/.bashrc`], places, ['.bashrc', '.zshrc']).unused, ['.zshrc']);
  });
});

describe('allowSensitive in a profile', () => {
  function setUp(): { dir: string; home: string } {
    const dir = scratchFolder('hintbox-sensitive-');
    const home = path.join(dir, 'home');
    mkdirSync(path.join(home, '.config', 'gh'), { recursive: true });
    mkdirSync(path.join(home, '.local', 'share'), { recursive: true });
    writeFileSync(path.join(home, '.bashrc'), 'export A=1\n');
    writeFileSync(path.join(home, '.config', 'gh', 'hosts.yml'), 'token\n');
    return { dir, home };
  }
  const profileText = (mounts: unknown[]): string => stringify({ name: 'opt', server: { image: 'x' }, mounts });
  const load = (dir: string, home: string, mounts: unknown[], vars: Record<string, string> = {}) => {
    const file = path.join(dir, 'opt.yaml');
    return loadProfile(file, { text: profileText(mounts), home, vars, ownPaths: [] });
  };
  const problemsOf = (fn: () => unknown): string[] => {
    try {
      fn();
    } catch (error) {
      if (error instanceof ProfileError) return error.message.split('\n');
      throw error;
    }
    return assert.fail('the profile was accepted');
  };

  it('refuses ~/.bashrc and ~/.local/share (it holds the keyrings) without it, in one line each: file: field.path: message', () => {
    const { dir, home } = setUp();
    const lines = problemsOf(() =>
      load(dir, home, [
        { source: path.join(home, '.bashrc'), target: '/data/rc' },
        { source: path.join(home, '.local', 'share'), target: '/data/share', mode: 'ro' },
      ]),
    );
    const file = path.join(dir, 'opt.yaml');
    assert.equal(lines.length, 2, lines.join('\n'));
    assert.equal(
      lines[0],
      `${file}: mounts[0].source: ${home}/.bashrc is a shell start-up file: not mounted unless the mount lists it, allowSensitive: [".bashrc"]`,
    );
    assert.equal(
      lines[1],
      `${file}: mounts[1].source: ${home}/.local/share contains ${home}/.local/share/systemd, user services started at login; ` +
        `${home}/.local/share contains ${home}/.local/share/keyrings, the desktop keyring: ` +
        'not mounted unless the mount lists it, allowSensitive: [".local/share/systemd", ".local/share/keyrings"]',
    );
  });

  it('accepts the mount that names exactly what it holds, and keeps the names for plan', () => {
    const { dir, home } = setUp();
    const profile = load(dir, home, [
      { source: path.join(home, '.bashrc'), target: '/data/rc', mode: 'ro', allowSensitive: ['.bashrc'] },
    ]);
    assert.deepEqual(profile.mounts[0]?.allowSensitive, ['.bashrc']);
  });

  // proves: DENYLIST
  it('no blanket opt-in: an unknown name, a pattern, a name the mount does not hold, a repeat, an empty list', () => {
    const { dir, home } = setUp();
    const rc = path.join(home, '.bashrc');
    const cases: Array<[unknown, RegExp]> = [
      [['*'], /mounts\[0\]\.allowSensitive\[0\]: expected one of \.bashrc, /],
      [['all'], /mounts\[0\]\.allowSensitive\[0\]: expected one of /],
      [true, /mounts\[0\]\.allowSensitive: /],
      [['.bashrc', '.zshrc'], /mounts\[0\]\.allowSensitive\[1\]: \.zshrc: .* neither is, holds nor lies in it/],
      [['.bashrc', '.bashrc'], /mounts\[0\]\.allowSensitive: expected each name once/],
      [[], /mounts\[0\]\.allowSensitive: expected at least one name/],
    ];
    for (const [allowSensitive, expected] of cases) {
      const lines = problemsOf(() => load(dir, home, [{ source: rc, target: '/data/rc', allowSensitive }]));
      assert.ok(
        lines.some((l) => expected.test(l)),
        `${JSON.stringify(allowSensitive)}: ${lines.join(' | ')}`,
      );
      const fields = lines.map((l) => /: (mounts\[0\][^:]*): /.exec(l)?.[1]);
      assert.equal(new Set(fields).size, fields.length, `one line per field: ${lines.join(' | ')}`);
    }
  });

  it("the ssh agent's socket named by the profile's SSH_AUTH_SOCK, and its folder, need the opt-in", () => {
    const { dir, home } = setUp();
    const agent = path.join(dir, 'agent');
    mkdirSync(agent);
    writeFileSync(path.join(agent, 'socket'), '');
    const vars = { SSH_AUTH_SOCK: path.join(agent, 'socket') };
    const lines = problemsOf(() => load(dir, home, [{ source: agent, target: '/data/a', mode: 'ro' }], vars));
    assert.match(lines[0] ?? '', /mounts\[0\]\.source: .* contains .*socket, the ssh agent's socket/);
    const ok = load(
      dir,
      home,
      [{ source: agent, target: '/data/a', mode: 'ro', allowSensitive: ['SSH_AUTH_SOCK'] }],
      vars,
    );
    assert.deepEqual(ok.mounts[0]?.allowSensitive, ['SSH_AUTH_SOCK']);
  });
});
