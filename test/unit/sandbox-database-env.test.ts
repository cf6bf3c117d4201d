import { execFile, execFileSync, spawnSync } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { parse } from 'pg-connection-string';
import { encodeErrorResponse, readStartupPacket } from '../../src/database/pg-wire.js';
import { PG_SOCKET_PORT, SANDBOX_PG_SOCKET_DIR, sandboxDatabaseEnv } from '../../src/database/socket-relay.js';
import { scratchFolder } from '../support/scratch-folder.js';

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

/** What a client sent to the socket its URL named: its startup parameters and its password. */
interface Seen {
  parameters: Record<string, string>;
  password: string;
}

/**
 * Listens where a DATABASE_URL for `dir` points (`dir/.s.PGSQL.5432`), as a Postgres that asks
 * for a cleartext password, notes what a client sent, and refuses it. So a driver is
 * seen to read the socket folder, port, role, password and database from the URL, with no
 * server.
 */
async function listenAsPostgres(dir: string): Promise<{ seen: () => Seen | undefined; close: () => Promise<void> }> {
  const server = net.createServer();
  let seen: Seen | undefined;
  const sockets = new Set<net.Socket>();
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    let buffer = Buffer.alloc(0);
    let parameters: Record<string, string> | undefined;
    socket.on('data', (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      for (;;) {
        if (parameters === undefined) {
          const read = readStartupPacket(buffer);
          if (read === undefined) return;
          buffer = buffer.subarray(read.bytes);
          const { packet } = read;
          if (packet.kind === 'ssl-request' || packet.kind === 'gssenc-request') {
            socket.write('N');
            continue;
          }
          if (packet.kind !== 'startup') return void socket.destroy();
          parameters = packet.parameters;
          const askPassword = Buffer.alloc(9);
          askPassword.write('R', 0, 'latin1');
          askPassword.writeInt32BE(8, 1);
          askPassword.writeInt32BE(3, 5); // AuthenticationCleartextPassword
          socket.write(askPassword);
          continue;
        }
        if (buffer.length < 5) return;
        const length = buffer.readInt32BE(1);
        if (buffer.length < 1 + length) return;
        if (buffer.toString('latin1', 0, 1) !== 'p') return void socket.destroy();
        // Noted before the refusal is sent: the client has it once it has failed.
        seen = { parameters, password: buffer.toString('utf8', 5, length) };
        socket.end(encodeErrorResponse({ severity: 'FATAL', sqlstate: '28P01', message: 'seen by the test' }));
        return;
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(path.join(dir, `.s.PGSQL.${PG_SOCKET_PORT}`), resolve));
  return {
    seen: () => seen,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** A Python that has `module`: the PATH's, else Debian's (python3-asyncpg, python3-psycopg). */
function pythonWith(module: string): string | undefined {
  return ['python3', '/usr/bin/python3'].find(
    (python) => spawnSync(python, ['-c', `import ${module}`], { stdio: 'ignore' }).status === 0,
  );
}

const run = promisify(execFile);
const CLIENT_ENV = { PATH: process.env.PATH ?? '' };
const asyncpgPython = pythonWith('asyncpg');
const psycopgPython = pythonWith('psycopg');

/** Each client, given only the URL, connecting to a socket folder of this test's. */
const clients: { name: string; skip: string | false; connect: (url: string) => Promise<unknown> }[] = [
  {
    name: 'node-postgres',
    skip: false,
    connect: async (url) => {
      const client = new pg.Client({ connectionString: url });
      client.on('error', () => undefined);
      await client.connect().finally(() => void client.end().catch(() => undefined));
    },
  },
  {
    name: 'libpq (psql)',
    skip: !hasPsql() && 'no psql here',
    connect: (url) => run('psql', [url, '-Atc', 'SELECT 1'], { env: CLIENT_ENV }),
  },
  {
    name: 'psycopg (libpq)',
    skip: psycopgPython === undefined && 'no psycopg here (Debian: python3-psycopg)',
    connect: (url) =>
      run(psycopgPython!, ['-c', 'import sys, psycopg; psycopg.connect(sys.argv[1], connect_timeout=5)', url], {
        env: CLIENT_ENV,
      }),
  },
  {
    name: 'asyncpg',
    skip: asyncpgPython === undefined && 'no asyncpg here (Debian: python3-asyncpg)',
    connect: (url) =>
      run(
        asyncpgPython!,
        ['-c', 'import sys, asyncio, asyncpg; asyncio.run(asyncpg.connect(sys.argv[1], timeout=5))', url],
        { env: CLIENT_ENV },
      ),
  },
];

describe("each driver, given only the sandbox's DATABASE_URL, connects to the socket it names", () => {
  for (const client of clients) {
    it(
      `${client.name}: the socket folder and port, as the role, with its password, to its database`,
      {
        skip: client.skip,
        timeout: 30_000,
      },
      async () => {
        const dir = scratchFolder('hintbox-pg-url-');
        const postgres = await listenAsPostgres(dir);
        try {
          const url = sandboxDatabaseEnv(role, dir).DATABASE_URL;
          const refused = await client.connect(url).then(
            () => assert.fail('connected to a Postgres that refuses everyone'),
            (error: Error & { stderr?: string }) => `${error.message}\n${error.stderr ?? ''}`,
          );
          const seen = postgres.seen();
          assert.ok(seen, `nothing came to the socket the URL names:\n${refused}`);
          assert.equal(seen.parameters.user, role.user, refused);
          assert.equal(seen.parameters.database, role.database, refused);
          assert.equal(seen.password, role.password, refused);
          assert.match(refused, /seen by the test/, 'the refusal came from this socket');
        } finally {
          await postgres.close();
        }
      },
    );
  }
});
