import { HintboxError } from '../util/hintbox-error.js';

/**
 * Pure handling of the admin connection URL: where it points (for messages and for the socket
 * relay), the same URL with another database, and an error text with the URL's password taken
 * out. No connection here; the URL itself is never logged or echoed.
 */

/** Where the admin URL points: for error messages (never the password) and for the relay. */
export interface AdminEndpoint {
  /** Host name, IP address, or the directory of a Unix socket. */
  host: string;
  port: number;
  user: string;
  database: string;
  /** For the socket relay: TCP host and port, or the path of the server's Unix socket. */
  upstream: { host: string; port: number } | { path: string };
}

/** The admin connection failed: names host, port, user and the reason; never the password. */
export class DatabaseConnectionError extends HintboxError {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'DatabaseConnectionError';
  }
}

/**
 * Reads host, port, user and database from a `postgres://` / `postgresql://` URL, including
 * the socket forms (`postgresql://u@%2Frun%2Fpostgresql/db`, `postgresql:///db?host=/tmp`).
 */
export function adminEndpoint(adminUrl: string): AdminEndpoint {
  const url = parseAdminUrl(adminUrl);
  const host = decodeURIComponent(url.hostname) || url.searchParams.get('host') || 'localhost';
  const port = Number(url.port || url.searchParams.get('port') || 5432);
  const user = decodeURIComponent(url.username) || url.searchParams.get('user') || '';
  const database = decodeURIComponent(url.pathname.replace(/^\//, '')) || url.searchParams.get('dbname') || user;
  const upstream = host.startsWith('/') ? { path: `${host.replace(/\/+$/, '')}/.s.PGSQL.${port}` } : { host, port };
  return { host, port, user, database, upstream };
}

/** The admin URL with another database; everything else (TLS options, socket host) is kept. */
export function withDatabase(adminUrl: string, database: string): string {
  const url = parseAdminUrl(adminUrl);
  url.pathname = `/${encodeURIComponent(database)}`;
  // Touching searchParams re-encodes the query (host=/tmp → %2Ftmp), so only when needed.
  if (url.searchParams.has('dbname')) url.searchParams.delete('dbname');
  return url.toString();
}

/**
 * The error's message with its SQLSTATE, and every trace of the URL's password (as written,
 * and percent-decoded) replaced by `***`: drivers may echo what they were given.
 */
export function connectionFailureReason(error: unknown, adminUrl: string): string {
  const e = error as { message?: string; code?: string };
  let reason = e.message || String(error);
  if (e.code && !reason.includes(e.code)) reason += ` (${e.code})`;
  const encoded = parseAdminUrl(adminUrl).password;
  for (const secret of new Set([encoded, safeDecode(encoded)])) {
    if (secret) reason = reason.split(secret).join('***');
  }
  return reason;
}

/** Throws DatabaseConnectionError for anything that is not a postgres(ql):// URL. */
function parseAdminUrl(adminUrl: string): URL {
  let url: URL;
  try {
    url = new URL(adminUrl);
  } catch {
    // The URL holds the password and the parser's error carries its input: not passed on.
    throw new DatabaseConnectionError('the admin connection URL is not a valid URL');
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
    throw new DatabaseConnectionError(`the admin connection URL must start with postgresql:// (not ${url.protocol}//)`);
  }
  return url;
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    // A `%` not followed by two hex digits: the password as written is all there is to hide.
    return s;
  }
}
