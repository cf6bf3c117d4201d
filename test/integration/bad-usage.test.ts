import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { LIAR_IMAGE } from './support/docker.js';
import { hintboxCommand, writeProfile } from './support/hintbox-process.js';

/**
 * Every kind of bad usage (the command line, hintbox's environment variables, a profile, a lock
 * file) exits 2 with one line that names what is wrong: `hintbox --help` promises it, and scripts
 * tell "fix your call" from "it failed" by it. Docker is pointed at a socket that does not exist,
 * so a check that is missing shows as the exit code 1 of an unreachable engine, not as a run.
 */
integrationSuite('bad usage exits 2 with one line naming what is wrong', { timeout: 120_000 }, () => {
  const NO_DOCKER = { DOCKER_HOST: 'unix:///tmp/hintbox-bad-usage-no-such.sock' };
  const profile = writeProfile({ name: 'usage', server: { image: LIAR_IMAGE } });
  const withDatabase = writeProfile({
    name: 'usagedb',
    server: { image: LIAR_IMAGE },
    database: { adminUrlEnv: 'HINTBOX_TEST_UNSET_ADMIN_URL', database: 'shop', schemas: ['public'], privilege: 'read' },
  });
  const unsetVariable = writeProfile({ name: 'usagevar', server: { image: '${HINTBOX_TEST_UNSET_VARIABLE}' } });
  const badLock = writeProfile({ name: 'usagelock', server: { image: LIAR_IMAGE } });
  writeFileSync(path.join(path.dirname(badLock), 'profile.lock.json'), '[]');

  const cases: { why: string; args: string[]; env?: Record<string, string>; says: RegExp }[] = [
    { why: 'an unknown command', args: ['frobnicate'], says: /unknown command "frobnicate"/ },
    {
      why: 'an unknown option',
      args: ['run', profile, '--bogus'],
      says: /^run: unknown option --bogus; see hintbox run --help$/,
    },
    {
      why: 'an unknown short option',
      args: ['plan', '-x', profile],
      says: /^plan: unknown option -x; see hintbox plan --help$/,
    },
    {
      why: 'an option without its value',
      args: ['run', profile, '--tags'],
      says: /^run: --tags needs a value; see hintbox run --help$/,
    },
    {
      why: 'a value for a flag',
      args: ['run', profile, '--rebuild=yes'],
      says: /--rebuild takes no value; see hintbox/,
    },
    { why: 'no profile', args: ['run'], says: /^run: expected one profile file, got 0/ },
    { why: 'two profiles', args: ['plan', profile, profile], says: /^plan: expected one profile file, got 2/ },
    { why: 'a --tags that names no tag', args: ['run', profile, '--tags', ','], says: /--tags: expected tag names/ },
    {
      why: 'a profile that is not there',
      args: ['run', '/nonexistent/p.yaml'],
      says: /p\.yaml: no such file \(give the path of a profile/,
    },
    {
      why: 'a profile variable that is not set',
      args: ['plan', unsetVariable],
      says: /server\.image: environment variable HINTBOX_TEST_UNSET_VARIABLE is not set/,
    },
    {
      why: 'a malformed lock file',
      args: ['run', badLock],
      // run reads the lock file once Docker answers (and before it starts anything).
      env: { DOCKER_HOST: process.env.DOCKER_HOST ?? 'unix:///var/run/docker.sock' },
      says: /profile\.lock\.json: .*/,
    },
    { why: 'images without build', args: ['images', 'make'], says: /^images: expected "build", got "make"/ },
    { why: 'approve naming nothing', args: ['approve', profile], says: /^approve: name the tools to approve/ },
    { why: 'a bad --decision', args: ['audit', '--decision', 'maybe'], says: /--decision must be/ },
    { why: 'a bad --outcome', args: ['audit', '--outcome', 'fine'], says: /--outcome must be one of/ },
    { why: 'a bad --since', args: ['audit', '--since', 'yesterday'], says: /--since must be an ISO time/ },
    { why: 'a bad --limit', args: ['audit', '--limit', '0'], says: /--limit must be an integer/ },
    { why: '--all with --limit', args: ['audit', '--all', '--limit', '3'], says: /--all and --limit exclude/ },
    {
      why: 'an argument to audit verify',
      args: ['audit', 'verify', 'x'],
      says: /^audit verify: unexpected argument x/,
    },
    { why: 'audit ship without a database', args: ['audit', 'ship'], says: /set HINTBOX_DATABASE_URL/ },
    { why: 'db without prepare', args: ['db'], says: /^db: expected "prepare", got nothing/ },
    { why: 'db prepare without a database section', args: ['db', 'prepare', profile], says: /has no database section/ },
    {
      why: "db prepare when the admin URL's variable is not set",
      args: ['db', 'prepare', withDatabase],
      says: /database\.adminUrlEnv: environment variable HINTBOX_TEST_UNSET_ADMIN_URL is not set/,
    },
    { why: 'sweep with two profiles', args: ['sweep', profile, profile], says: /^sweep: expected one profile file/ },
    { why: 'demo with an argument', args: ['demo', 'now'], says: /^demo: unexpected argument now/ },
    {
      why: 'a Docker engine on another host',
      args: ['run', profile],
      env: { DOCKER_HOST: 'tcp://192.0.2.1:2375' },
      says: /DOCKER_HOST=tcp:\/\/192\.0\.2\.1:2375: hintbox needs a Docker engine on this host/,
    },
    {
      why: 'an unknown log level',
      args: ['audit', '--limit', '1'],
      env: { HINTBOX_LOG_LEVEL: 'loud' },
      says: /HINTBOX_LOG_LEVEL: expected debug, info, warn or error, got "loud"/,
    },
    {
      why: 'an audit sink that is not a Postgres URL',
      args: ['run', profile],
      env: { HINTBOX_DATABASE_URL: 'mysql://somewhere/db' },
      says: /HINTBOX_DATABASE_URL: expected a postgres:\/\/ or postgresql:\/\/ URL/,
    },
  ];

  for (const c of cases) {
    it(`exits 2 for ${c.why}`, async () => {
      const { code, stderr } = await hintboxCommand(c.args, { ...NO_DOCKER, ...c.env });
      assert.equal(code, 2, `hintbox ${c.args.join(' ')}: ${stderr}`);
      const lines = stderr.trimEnd().split('\n');
      assert.equal(lines.length, 1, `one line: ${stderr}`);
      assert.match(lines[0]!, c.says);
    });
  }

  it('exits 2 with the usage when no command is given', async () => {
    const { code, stdout } = await hintboxCommand([], NO_DOCKER);
    assert.equal(code, 2);
    assert.match(stdout, /^hintbox .*\n\nUsage: hintbox <command>/);
  });
});
