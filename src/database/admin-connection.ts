import { Client, type ClientConfig } from 'pg';
import { DatabaseConnectionError, adminEndpoint, connectionFailureReason, withDatabase } from './admin-url.js';

/**
 * Connects to the admin URL with the target database, with a clear error when that fails.
 * The session's search_path is pg_catalog only, so names Postgres prints (regprocedure) are
 * schema-qualified and the statements hintbox prints mean the same in any session.
 */
export async function connectAdmin(adminUrl: string, database: string, timeoutMs: number): Promise<Client> {
  const endpoint = adminEndpoint(adminUrl);
  const config: ClientConfig = {
    connectionString: withDatabase(adminUrl, database),
    connectionTimeoutMillis: timeoutMs,
    application_name: 'hintbox',
  };
  const client = new Client(config);
  // An idle admin connection that breaks must not crash the process; the next query fails.
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SET search_path = pg_catalog, pg_temp');
    return client;
  } catch (error) {
    await client.end().catch(() => undefined);
    throw new DatabaseConnectionError(
      `cannot connect to Postgres at ${endpoint.host}:${endpoint.port} (database ${JSON.stringify(database)}, user ${JSON.stringify(endpoint.user)}): ${connectionFailureReason(error, adminUrl)}`,
      { cause: error },
    );
  }
}

/** Throws DatabaseConnectionError unless the connected user is a superuser or has CREATEROLE. */
export async function assertCanCreateRoles(client: Client, adminUrl: string): Promise<void> {
  const { rows } = await client.query<{ can: boolean; name: string }>(
    'SELECT rolsuper OR rolcreaterole AS can, rolname AS name FROM pg_roles WHERE rolname = current_user',
  );
  if (!rows[0]?.can) {
    const endpoint = adminEndpoint(adminUrl);
    throw new DatabaseConnectionError(
      `the admin user ${JSON.stringify(rows[0]?.name ?? endpoint.user)} at ${endpoint.host}:${endpoint.port} cannot create roles (it needs SUPERUSER or CREATEROLE)`,
    );
  }
}

/** Runs `work` between BEGIN and COMMIT; on any failure, rolls back and rethrows. */
export async function inTransaction(client: Client, work: () => Promise<void>): Promise<void> {
  await client.query('BEGIN');
  try {
    await work();
    await client.query('COMMIT');
  } catch (error) {
    // The first failure is the one worth reporting; a failed ROLLBACK means the connection is gone.
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}
