import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  DatabaseConnectionError,
  adminEndpoint,
  connectionFailureReason,
  withDatabase,
} from '../../src/database/admin-url.js';

describe('adminEndpoint', () => {
  it('reads TCP and Unix-socket URLs, for messages and for the relay upstream', () => {
    assert.deepEqual(adminEndpoint('postgres://admin:s%40cret@db.example:6543/app?sslmode=require'), {
      host: 'db.example',
      port: 6543,
      user: 'admin',
      database: 'app',
      upstream: { host: 'db.example', port: 6543 },
    });
    assert.deepEqual(adminEndpoint('postgresql://admin@%2Fvar%2Frun%2Fpostgresql/app').upstream, {
      path: '/var/run/postgresql/.s.PGSQL.5432',
    });
    assert.deepEqual(adminEndpoint('postgresql:///app?host=/tmp&port=5433').upstream, { path: '/tmp/.s.PGSQL.5433' });
    assert.equal(adminEndpoint('postgres://admin@db').port, 5432);
  });

  it('takes user and database from the query when the URL has none, and the database defaults to the user', () => {
    const endpoint = adminEndpoint('postgresql:///?host=/run/pg/&user=boss&dbname=app');
    assert.deepEqual(endpoint, {
      host: '/run/pg/',
      port: 5432,
      user: 'boss',
      database: 'app',
      upstream: { path: '/run/pg/.s.PGSQL.5432' },
    });
    assert.equal(adminEndpoint('postgres://boss@db').database, 'boss');
    assert.equal(adminEndpoint('postgres://db').host, 'db');
    assert.equal(adminEndpoint('postgres:///app').host, 'localhost');
  });

  it('refuses what is not a postgres URL with a DatabaseConnectionError that does not quote it', () => {
    assert.throws(() => adminEndpoint('mysql://db/app'), /must start with postgresql/);
    for (const bad of ['not a url', 'postgres//admin:hunter2@db']) {
      assert.throws(
        () => adminEndpoint(bad),
        (error: Error) =>
          error instanceof DatabaseConnectionError &&
          /not a valid URL/.test(error.message) &&
          !error.message.includes('hunter2'),
      );
    }
  });
});

describe('withDatabase', () => {
  it('swaps the database and keeps everything else', () => {
    assert.equal(
      withDatabase('postgres://admin:pw@db:5432/postgres?sslmode=require', 'my db'),
      'postgres://admin:pw@db:5432/my%20db?sslmode=require',
    );
    assert.equal(withDatabase('postgresql:///x?host=/tmp', 'app'), 'postgresql:///app?host=/tmp');
  });

  it('drops a dbname parameter, which would otherwise win over the path', () => {
    assert.equal(withDatabase('postgresql:///?host=/tmp&dbname=old', 'app'), 'postgresql:///app?host=%2Ftmp');
  });
});

describe('connectionFailureReason', () => {
  it('adds the SQLSTATE when the message lacks it', () => {
    const url = 'postgres://admin:pw@db/app';
    assert.equal(
      connectionFailureReason({ message: 'password authentication failed', code: '28P01' }, url),
      'password authentication failed (28P01)',
    );
    assert.equal(connectionFailureReason({ message: 'failed: 28P01', code: '28P01' }, url), 'failed: 28P01');
    assert.equal(connectionFailureReason('plain string', url), 'plain string');
  });

  it('masks the password as written and percent-decoded, wherever it appears', () => {
    const url = 'postgres://admin:s%40cret%2Fx@db/app';
    const reason = connectionFailureReason(new Error('bad password "s@cret/x" (sent s%40cret%2Fx) for s@cret/x'), url);
    assert.equal(reason, 'bad password "***" (sent ***) for ***');
  });

  it('masks a password that is not valid percent-encoding as written', () => {
    assert.equal(connectionFailureReason(new Error('echo 50%zz'), 'postgres://admin:50%zz@db/app'), 'echo ***');
  });

  it('leaves the message alone when the URL has no password', () => {
    assert.equal(connectionFailureReason(new Error('timeout'), 'postgres://admin@db/app'), 'timeout');
  });
});
