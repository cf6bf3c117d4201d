import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chownSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { before, it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { containersOf, docker, ensureTestImages, FIXTURES } from './support/docker.js';
import { parse, stringify } from 'yaml';
import { hintboxCommand, runHintbox } from './support/hintbox-process.js';
import { scratchFolder } from '../support/scratch-folder.js';
import { referencedVariables } from '../../src/profile/interpolate.js';

/**
 * `hintbox import` of a hostile MCP registry entry (test/fixtures/import/registry-hostile.json):
 * its filepath arguments name the operator's shell start-up file (`{HOME}/.bashrc`, with a
 * placeholder the publisher defines) and GitHub CLI's credentials (`~/.config/gh`, a default);
 * its environment names host secrets (`AWS_SECRET_ACCESS_KEY`, `GITHUB_TOKEN`) and the ssh
 * agent's socket. The package is the pynotes fixture, whose `write_note` writes the file
 * PYNOTES_FILE names: set by the publisher to the `.bashrc` mount. Before the fix, plan showed
 * `~/.bashrc -> /data/config (read-write)`, one approved write_note rewrote it, and the host's
 * secrets were in the sandboxes' environment.
 */
const SECRETS = {
  AWS_SECRET_ACCESS_KEY: 'aws-secret-of-the-operator-0123',
  GITHUB_TOKEN: 'ghp_operator_token_0123456789',
  SSH_AUTH_SOCK: '/tmp/ssh-operator/agent.1',
};

integrationSuite('hintbox import of a hostile registry entry', { timeout: 600_000, images: [ensureTestImages] }, () => {
  let home: string;
  let bashrc: string;
  let hosts: string;
  let bashrcBefore: Buffer;
  let hostsBefore: Buffer;
  let folder: string;
  let profile: string;
  let env: Record<string, string>;
  let reads: string[];
  before(async () => {
    const wheels = scratchFolder('hintbox-wheels-');
    execFileSync('python3', [path.join(FIXTURES, 'pynotes', 'make_wheels.py'), wheels]);
    // The operator's home: a shell start-up file and GitHub CLI's credentials, owned by a user (not root).
    home = scratchFolder('fake-home-');
    bashrc = path.join(home, '.bashrc');
    hosts = path.join(home, '.config', 'gh', 'hosts.yml');
    writeFileSync(bashrc, 'export PATH="$HOME/bin:$PATH"\n');
    mkdirSync(path.dirname(hosts), { recursive: true });
    writeFileSync(hosts, 'github.com:\n  oauth_token: gho_operator_cli_token\n');
    for (const p of [home, path.join(home, '.config'), path.dirname(hosts), bashrc, hosts]) chownSync(p, 1000, 1000);
    bashrcBefore = readFileSync(bashrc);
    hostsBefore = readFileSync(hosts);
    // hintbox runs with that home and the operator's secrets in its environment.
    env = { HOME: home, PIP_NO_INDEX: '1', PIP_FIND_LINKS: wheels, ...SECRETS };
    folder = scratchFolder('hintbox-import-hostile-');
    writeFileSync(
      path.join(folder, 'server.json'),
      readFileSync(path.join(FIXTURES, 'import', 'registry-hostile.json')),
    );
    profile = path.join(folder, 'hintbox', 'weather.yaml');
  });

  // proves: IMPORT-PUBLISHER-NO-HOST
  it('import writes a profile that reads only HINTBOX_WEATHER_… variables, and its notes name exactly those', async () => {
    const imported = await hintboxCommand(['import', path.join(folder, 'server.json')], env);
    assert.equal(imported.code, 0, imported.stderr);
    const text = readFileSync(profile, 'utf8');
    reads = referencedVariables(parse(text));
    assert.ok(reads.length > 0);
    for (const name of reads) assert.match(name, /^HINTBOX_WEATHER_[A-Z0-9_]+$/);
    for (const name of ['HOME', 'AWS_SECRET_ACCESS_KEY', 'GITHUB_TOKEN', 'SSH_AUTH_SOCK', 'CONFIG', 'GH_HOSTS'])
      assert.ok(!reads.includes(name), `${name} is not read`);
    const told = /Reads from the environment hintbox runs with only: ([A-Z0-9_, ]+)\. Set/.exec(
      text.replace(/\n# +/g, ' '),
    );
    assert.deepEqual(told?.[1]?.split(', ').sort(), reads, 'the notes name exactly what the profile reads');
    const printed = /^The profiles read (\S.*) from the environment/m.exec(imported.stdout)?.[1];
    assert.deepEqual(printed?.split(', ').sort(), reads, imported.stdout);
  });

  // proves: DENYLIST
  it('plan without the variables is refused, one line naming each to set; with them set to ~/.bashrc and ~/.config/gh, the deny list refuses it', async () => {
    const unset = await hintboxCommand(['plan', profile], env);
    assert.equal(unset.code, 2, unset.stderr);
    const named = [...unset.stderr.matchAll(/: environment variable (\S+) is not set and has no default$/gm)].map(
      (m) => m[1],
    );
    // Those of env only a run needs (plan lists the server without them): the others, each named.
    const needed = referencedVariables({ ...(parse(readFileSync(profile, 'utf8')) as object), env: {} });
    assert.deepEqual(named.sort(), needed, unset.stderr);
    for (const value of Object.values(SECRETS)) assert.ok(!unset.stderr.includes(value), 'no secret in the message');

    const workspace = scratchFolder('hintbox-weather-cache-');
    const pointed = {
      ...env,
      ...Object.fromEntries(reads.map((name) => [name, 'operator-chosen'])),
      HINTBOX_WEATHER_CONFIG: bashrc,
      HINTBOX_WEATHER_GH_HOSTS: path.join(home, '.config', 'gh'),
      HINTBOX_WEATHER_CACHE: workspace,
    };
    const denied = await hintboxCommand(['plan', profile], pointed);
    assert.equal(denied.code, 2, denied.stderr);
    const lines = denied.stderr.trim().split('\n');
    assert.deepEqual(lines, [
      `${profile}: mounts[0].source: ${bashrc} is a shell start-up file: not mounted unless the mount lists it, allowSensitive: [".bashrc"]`,
      `${profile}: mounts[1].source: ${path.join(home, '.config', 'gh')} is GitHub CLI's credentials: not mounted unless the mount lists it, allowSensitive: [".config/gh"]`,
    ]);
    assert.deepEqual(readFileSync(bashrc), bashrcBefore, '.bashrc is byte-identical');
    assert.deepEqual(readFileSync(hosts), hostsBefore, 'hosts.yml is byte-identical');
  });

  // proves: DENYLIST
  it('with allowSensitive naming .bashrc and .config/gh, plan takes the mounts and prints the opt-in; the files stay byte-identical', async () => {
    const edited = parse(readFileSync(profile, 'utf8')) as { mounts: Record<string, unknown>[] };
    edited.mounts[0]!.allowSensitive = ['.bashrc'];
    edited.mounts[1]!.allowSensitive = ['.config/gh'];
    const optedIn = path.join(folder, 'hintbox', 'opted-in.yaml');
    writeFileSync(optedIn, stringify(edited));
    const workspace = scratchFolder('hintbox-weather-cache-');
    const set = {
      ...env,
      ...Object.fromEntries(reads.map((name) => [name, 'operator-chosen'])),
      HINTBOX_WEATHER_CONFIG: bashrc,
      HINTBOX_WEATHER_GH_HOSTS: path.join(home, '.config', 'gh'),
      HINTBOX_WEATHER_CACHE: workspace,
    };
    const plan = await hintboxCommand(['plan', optedIn], set);
    assert.equal(plan.code, 0, plan.stderr);
    assert.ok(plan.stdout.includes(`${bashrc} -> /data/config (read-only)`), plan.stdout);
    assert.ok(!plan.stdout.includes('(read-write)'), 'the proposed mounts are read-only for every tool');
    assert.ok(
      plan.stdout.includes(
        `sensitive: mounts[0] ${bashrc} -> /data/config holds, as the profile allows: .bashrc (a shell start-up file)`,
      ),
      plan.stdout,
    );
    assert.match(
      plan.stdout,
      /^sensitive: mounts\[1\] .*\.config\/gh -> \/data\/gh_hosts holds, as the profile allows: \.config\/gh/m,
    );
    assert.deepEqual(readFileSync(bashrc), bashrcBefore, '.bashrc is byte-identical');
    assert.deepEqual(readFileSync(hosts), hostsBefore, 'hosts.yml is byte-identical');
  });

  // proves: IMPORT-PUBLISHER-NO-HOST
  it('run with the variables set to ordinary files: the sandboxes get what the operator set, never the host secrets the entry named', async () => {
    const workspace = scratchFolder('hintbox-weather-work-');
    writeFileSync(path.join(workspace, 'note.txt'), 'forecast: sunny\n');
    mkdirSync(path.join(workspace, 'gh'));
    mkdirSync(path.join(workspace, 'cache'));
    const set = {
      ...env,
      ...Object.fromEntries(reads.map((name) => [name, `set-by-operator-${name}`])),
      HINTBOX_WEATHER_CONFIG: path.join(workspace, 'note.txt'),
      HINTBOX_WEATHER_GH_HOSTS: path.join(workspace, 'gh'),
      HINTBOX_WEATHER_CACHE: path.join(workspace, 'cache'),
    };
    const approve = await hintboxCommand(['approve', profile, '--all', '--yes'], set);
    assert.equal(approve.code, 0, approve.stderr);
    await using run = await runHintbox(profile, { env: set });
    const note = await run.client.callTool({ name: 'read_note', arguments: {} });
    assert.deepEqual(note.content, [{ type: 'text', text: '[pynotes] forecast: sunny\n' }], JSON.stringify(note));
    const { docker: d } = await docker();
    const sandboxes = await containersOf(run.pid, false);
    assert.ok(sandboxes.length > 0);
    for (const sandbox of sandboxes) {
      const environment = (await d.getContainer(sandbox.Id).inspect()).Config.Env;
      assert.ok(
        environment.includes('GITHUB_TOKEN=set-by-operator-HINTBOX_WEATHER_GITHUB_TOKEN'),
        environment.join(' '),
      );
      for (const value of Object.values(SECRETS))
        assert.ok(!environment.some((e) => e.includes(value)), `${value} is not in the sandbox`);
    }
    assert.deepEqual(readFileSync(bashrc), bashrcBefore, '.bashrc is byte-identical');
    assert.deepEqual(readFileSync(hosts), hostsBefore, 'hosts.yml is byte-identical');
  });
});
