import { Client } from 'pg';
import { withDatabase } from '../../../src/database/admin-url.js';

/** A pg client through a sandbox's relay socket directory, as its role (the PG* variables it was given). */
export async function throughRelay(socketDir: string, env: Record<string, string>): Promise<Client> {
  const client = new Client({
    host: socketDir,
    port: 5432,
    user: env.PGUSER,
    password: env.PGPASSWORD,
    database: env.PGDATABASE,
  });
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

/**
 * The admin's ALTER TABLE on shop.items (over `url`), waiting at most a second for its lock: true
 * when it went through, else the SQLSTATE (55P03: a session of the sandbox still holds a lock).
 */
export async function adminAltersItems(url: string, column: string): Promise<true | string> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    await client.query("SET lock_timeout = '1s'");
    await client.query(`ALTER TABLE shop.items ADD COLUMN ${column} int`);
    return true;
  } catch (error) {
    return (error as { code?: string }).code ?? (error as Error).message;
  } finally {
    await client.end();
  }
}

/** Creates database `name` (as the admin of `adminUrl`) and returns the admin connected to it. */
export async function adminOfNewDatabase(adminUrl: string, name: string): Promise<Client> {
  const setup = new Client({ connectionString: adminUrl });
  await setup.connect();
  try {
    await setup.query(`CREATE DATABASE ${name}`);
  } finally {
    await setup.end();
  }
  const admin = new Client({ connectionString: withDatabase(adminUrl, name) });
  await admin.connect();
  return admin;
}
