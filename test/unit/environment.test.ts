import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { ENVIRONMENT_VARIABLES, readEnvironment } from '../../src/config/environment.js';
import { hintboxOwnPaths } from '../../src/config/hintbox-paths.js';

describe('readEnvironment', () => {
  it('gives every setting its default in an empty environment', () => {
    const { environment, problems } = readEnvironment({});
    assert.deepEqual(problems, []);
    const state = path.join(os.homedir(), '.local', 'state', 'hintbox');
    assert.deepEqual(environment, {
      dockerHost: undefined,
      engine: 'docker',
      gateImage: undefined,
      freezer: 'auto',
      logLevel: 'info',
      logFormat: 'text',
      stateDir: state,
      auditDir: path.join(state, 'audit'),
      auditKeyFile: path.join(state, 'audit-key.pem'),
      tracing: false,
      databaseUrl: undefined,
      baseImage: undefined,
      debianMirror: 'http://deb.debian.org/debian',
      egressNetworks: ['bridge'],
      egressDns: [],
      inContainer: undefined,
    });
  });

  it('takes HINTBOX_FREEZER auto or gate, and refuses anything else in one line', () => {
    assert.equal(readEnvironment({ HINTBOX_FREEZER: 'gate' }).environment.freezer, 'gate');
    assert.deepEqual(readEnvironment({ HINTBOX_FREEZER: 'cgroup' }).problems, [
      'HINTBOX_FREEZER: expected auto or gate, got "cgroup"',
    ]);
  });

  it('finds the state folder in HINTBOX_STATE_DIR, else XDG_STATE_HOME, and the audit log in it unless HINTBOX_AUDIT_DIR', () => {
    assert.equal(readEnvironment({ XDG_STATE_HOME: '/xdg' }).environment.stateDir, '/xdg/hintbox');
    const both = readEnvironment({ XDG_STATE_HOME: '/xdg', HINTBOX_STATE_DIR: 'rel/state' }).environment;
    assert.equal(both.stateDir, path.resolve('rel/state'));
    assert.equal(both.auditDir, path.join(path.resolve('rel/state'), 'audit'));
    assert.equal(readEnvironment({ HINTBOX_AUDIT_DIR: '/var/log/hb' }).environment.auditDir, '/var/log/hb');
  });

  it('reads HINTBOX_IN_CONTAINER as 1 (yes), 0 (no) or unset (look)', () => {
    assert.equal(readEnvironment({ HINTBOX_IN_CONTAINER: '1' }).environment.inContainer, true);
    assert.equal(readEnvironment({ HINTBOX_IN_CONTAINER: '0' }).environment.inContainer, false);
    assert.equal(readEnvironment({ HINTBOX_IN_CONTAINER: '' }).environment.inContainer, undefined);
  });

  it('takes an empty variable for an unset one', () => {
    const { environment, problems } = readEnvironment({
      HINTBOX_LOG_LEVEL: '',
      HINTBOX_AUDIT_DIR: '',
      DOCKER_HOST: '',
    });
    assert.deepEqual(problems, []);
    assert.equal(environment.logLevel, 'info');
    assert.equal(environment.auditDir, path.join(environment.stateDir, 'audit'));
    assert.equal(environment.dockerHost, undefined);
  });

  it('names every value it cannot use at once, one line each, without quoting a database password', () => {
    const { environment, problems } = readEnvironment({
      HINTBOX_ENGINE: 'nomad',
      HINTBOX_LOG_LEVEL: 'loud',
      HINTBOX_LOG_FORMAT: 'yaml',
      HINTBOX_DATABASE_URL: 'mysql://admin:s3cret@db/audit',
      HINTBOX_DEBIAN_MIRROR: 'ftp.debian.org',
      HINTBOX_IN_CONTAINER: 'yes',
      HINTBOX_EGRESS_DNS: '198.51.100.53,dns.example',
    });
    assert.deepEqual(problems, [
      'HINTBOX_LOG_LEVEL: expected debug, info, warn or error, got "loud"',
      'HINTBOX_ENGINE: expected docker or kubernetes, got "nomad"',
      'HINTBOX_LOG_FORMAT: expected text or json, got "yaml"',
      'HINTBOX_DATABASE_URL: expected a postgres:// or postgresql:// URL',
      'HINTBOX_DEBIAN_MIRROR: expected an http:// or https:// URL, got "ftp.debian.org"',
      'HINTBOX_EGRESS_DNS: expected IP addresses, comma-separated, got "198.51.100.53,dns.example"',
      'HINTBOX_IN_CONTAINER: expected 1 or 0, got "yes"',
    ]);
    assert.equal(environment.databaseUrl, undefined);
    for (const line of problems) assert.doesNotMatch(line, /s3cret/);
  });

  it('accepts the values it documents', () => {
    for (const level of ['debug', 'info', 'warn', 'error']) {
      assert.equal(readEnvironment({ HINTBOX_LOG_LEVEL: level }).environment.logLevel, level);
    }
    for (const engine of ['docker', 'kubernetes']) {
      assert.equal(readEnvironment({ HINTBOX_ENGINE: engine }).environment.engine, engine);
    }
    for (const format of ['text', 'json']) {
      assert.equal(readEnvironment({ HINTBOX_LOG_FORMAT: format }).environment.logFormat, format);
    }
    assert.deepEqual(readEnvironment({ HINTBOX_EGRESS_DNS: '198.51.100.53, 2001:db8::53' }).environment.egressDns, [
      '198.51.100.53',
      '2001:db8::53',
    ]);
    for (const url of ['postgres://u:p@h:5432/d', 'postgresql://h/d?sslmode=require']) {
      const { environment, problems } = readEnvironment({ HINTBOX_DATABASE_URL: url });
      assert.deepEqual(problems, []);
      assert.equal(environment.databaseUrl, url);
    }
  });
});

describe('hintboxOwnPaths', () => {
  it("names the audit folder apart only when it is not the state folder's", () => {
    const inside = readEnvironment({ HINTBOX_STATE_DIR: '/s' }).environment;
    assert.deepEqual(
      hintboxOwnPaths(inside).map((p) => p.what),
      ["hintbox's state folder (audit log, known tools)", "hintbox's installation", "hintbox's temporary folder"],
    );
    const apart = readEnvironment({ HINTBOX_STATE_DIR: '/s', HINTBOX_AUDIT_DIR: '/a' }).environment;
    assert.deepEqual(hintboxOwnPaths(apart).slice(0, 2), [
      { path: '/s', what: "hintbox's state folder (audit log, known tools)", oneNameEach: true },
      { path: '/a', what: "hintbox's audit log", oneNameEach: true },
    ]);
  });
});

describe('ENVIRONMENT_VARIABLES', () => {
  it("is docs/cli.md's table of environment variables, row for row", () => {
    const page = readFileSync(new URL('../../docs/cli.md', import.meta.url), 'utf8');
    const rows = [...page.matchAll(/^\| `([A-Z_]+)` \|/gm)].map((m) => m[1]);
    assert.deepEqual(
      rows,
      ENVIRONMENT_VARIABLES.map((v) => v.name),
    );
  });
});
