import { execFileSync, spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { parse } from 'pg-connection-string';
import { PG_SOCKET_PORT, SANDBOX_PG_SOCKET_DIR, sandboxDatabaseEnv } from '../../src/database/socket-relay.js';

// A role whose password and database need escaping in a URL.
const role = { user: 'hintbox_sess42_ro_offline_dbread', password: 'p@ss/w:rd?#%&', database: 'my shop' };
const env = sandboxDatabaseEnv(role);

function hasPsql(): boolean {
  return spawnSync('psql', ['--version'], { stdio: 'ignore' }).status === 0;
}

describe("the sandbox's DATABASE_URL", () => {
  it("is taken by Node's URL (WHATWG), with the socket folder as its percent-encoded host", () => {
    const url = new URL(env.DATABASE_URL);
    assert.equal(url.protocol, 'postgresql:');
    assert.equal(decodeURIComponent(url.hostname), SANDBOX_PG_SOCKET_DIR);
    assert.equal(url.port, String(PG_SOCKET_PORT));
    assert.equal(decodeURIComponent(url.username), role.user);
    assert.equal(decodeURIComponent(url.password), role.password);
    assert.equal(decodeURIComponent(url.pathname.slice(1)), role.database);
    assert.equal(url.search, '');
  });

  it('is read by node-postgres (pg-connection-string) as the socket folder, role, password and database', () => {
    const config = parse(env.DATABASE_URL);
    assert.equal(config.host, SANDBOX_PG_SOCKET_DIR);
    assert.equal(config.port, String(PG_SOCKET_PORT));
    assert.equal(config.user, role.user);
    assert.equal(config.password, role.password);
    assert.equal(config.database, role.database);
  });

  it('agrees with the PG* variables, also for a relay folder of its own', () => {
    const dir = '/tmp/hintbox-pg-AbC123';
    const own = sandboxDatabaseEnv(role, dir);
    assert.equal(own.PGHOST, dir);
    assert.equal(parse(own.DATABASE_URL).host, dir);
    assert.equal(decodeURIComponent(new URL(own.DATABASE_URL).hostname), dir);
  });

  // libpq: psql tries the socket the URL names. No server needed: the error names the socket.
  it('is read by libpq (psql) as the socket in that folder', { skip: !hasPsql() && 'no psql here' }, () => {
    const dir = '/nonexistent/hintbox-pg-test';
    const url = sandboxDatabaseEnv(role, dir).DATABASE_URL;
    let stderr = '';
    try {
      execFileSync('psql', [url, '-Atc', 'SELECT 1'], {
        env: { PATH: process.env.PATH ?? '', PGCONNECT_TIMEOUT: '2' },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      assert.fail('psql connected to a socket that does not exist');
    } catch (error) {
      stderr = String((error as { stderr?: Buffer }).stderr ?? '');
    }
    assert.match(stderr, new RegExp(`socket "${dir}/\\.s\\.PGSQL\\.${PG_SOCKET_PORT}"`));
  });
});
