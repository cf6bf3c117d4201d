import { createHash, createHmac, pbkdf2Sync } from 'node:crypto';
import type { DatabasePrivilege } from '../profile/database-profile-schema.js';
import { isoTime } from '../util/iso-time.js';

/**
 * Pure translation of hints into Postgres roles (which privilege a tool or sandbox gets is the
 * policy's, `src/policy/database-privilege.ts`): what its role is called, and the exact SQL that creates, grants, renews and drops it. No connection here;
 * the provisioner runs these statements, `hintbox plan` can print them.
 *
 * The boundary is Postgres's privilege system: a role is a member of nothing, owns nothing,
 * and holds only the grants below. `default_transaction_read_only` is a second layer that a
 * client can switch off, never the boundary.
 */

export type { DatabasePrivilege } from '../profile/database-profile-schema.js';

/** Every role hintbox creates starts with this; the sweep looks only at such roles. */
export const ROLE_PREFIX = 'hintbox_';

/** Postgres truncates longer identifiers, which would make two names collide. */
export const MAX_IDENTIFIER_BYTES = 63;

/**
 * `hintbox_<session>_<class>`: lower-case, `[a-z0-9_]`, at most 63 bytes. A class id that had
 * to be shortened or had other characters gets a short hash, so two classes never share a role.
 */
export function roleName(sessionId: string, classId: string): string {
  if (!/^[a-z0-9]{1,32}$/i.test(sessionId)) {
    throw new Error(`session id ${JSON.stringify(sessionId)} must be 1 to 32 letters or digits`);
  }
  const head = `${ROLE_PREFIX}${sessionId.toLowerCase()}_`;
  const plain = classId.toLowerCase().replace(/-/g, '_');
  let tail = plain.replace(/[^a-z0-9_]+/g, '_').replace(/^_+|_+$/g, '') || 'sandbox';
  const room = MAX_IDENTIFIER_BYTES - head.length;
  if (tail !== plain || tail.length > room) {
    const hash = createHash('sha256').update(classId).digest('hex').slice(0, 8);
    tail = `${tail.slice(0, room - hash.length - 1)}_${hash}`;
  }
  return head + tail;
}

/** `"name"`, with embedded quotes doubled. Refuses NUL, which Postgres cannot store. */
export function quoteIdent(name: string): string {
  if (name.includes('\0') || name === '') throw new Error('an identifier must be non-empty and without NUL');
  return `"${name.replace(/"/g, '""')}"`;
}

/**
 * A string literal that means the same whatever `standard_conforming_strings` is: with a
 * backslash, the `E'…'` form with backslashes doubled (as libpq's PQescapeLiteral does).
 */
export function quoteLiteral(value: string): string {
  if (value.includes('\0')) throw new Error('a string literal cannot contain NUL');
  const quoted = value.replace(/'/g, "''");
  return value.includes('\\') ? `E'${quoted.replace(/\\/g, '\\\\')}'` : `'${quoted}'`;
}

/** A schema-qualified object name. */
export interface QualifiedName {
  schema: string;
  name: string;
}

export function quoteQualified(object: QualifiedName): string {
  return `${quoteIdent(object.schema)}.${quoteIdent(object.name)}`;
}

/**
 * What a role comment records so a later run can tell whether the role's session still runs.
 * The admin writes it; a role cannot change its own comment.
 */
export interface RoleComment {
  session: string;
  /** The sandbox class the role serves. */
  class: string;
  /** Host name and pid of the hintbox process that owns the session. */
  host: string;
  pid: number;
  /** The database the role was granted on (where DROP OWNED must run). */
  database: string;
}

export function encodeRoleComment(comment: RoleComment): string {
  return JSON.stringify({ hintbox: 1, ...comment });
}

/** The comment of a role hintbox made, or undefined for anything else. */
export function parseRoleComment(text: string | null | undefined): RoleComment | undefined {
  if (!text) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (value === null || typeof value !== 'object') return undefined;
  const v = value as Record<string, unknown>;
  if (v.hintbox !== 1) return undefined;
  const { session, class: classId, host, pid, database } = v;
  if (
    typeof session !== 'string' ||
    typeof classId !== 'string' ||
    typeof host !== 'string' ||
    typeof database !== 'string' ||
    typeof pid !== 'number' ||
    !Number.isInteger(pid)
  ) {
    return undefined;
  }
  return { session, class: classId, host, pid, database };
}

/**
 * A SCRAM-SHA-256 verifier (`SCRAM-SHA-256$<iter>:<salt>$<StoredKey>:<ServerKey>`, RFC 5802/7677)
 * as Postgres stores it. Sent instead of the password, the password itself never reaches the
 * server (nor its statement log), and it is SCRAM whatever the server's password_encryption.
 * Only printable ASCII passwords: SASLprep leaves them unchanged, so the verifier matches.
 */
export function scramSha256Verifier(password: string, salt: Buffer, iterations = 4096): string {
  if (!/^[\x21-\x7e]+$/.test(password)) throw new Error('the role password must be printable ASCII');
  const salted = pbkdf2Sync(password, salt, iterations, 32, 'sha256');
  const clientKey = createHmac('sha256', salted).update('Client Key').digest();
  const storedKey = createHash('sha256').update(clientKey).digest();
  const serverKey = createHmac('sha256', salted).update('Server Key').digest();
  return `SCRAM-SHA-256$${iterations}:${salt.toString('base64')}$${storedKey.toString('base64')}:${serverKey.toString('base64')}`;
}

/** Kinds of relation a role may be granted on. */
export type RelationKind = 'table' | 'partitioned-table' | 'view' | 'materialized-view' | 'foreign-table';

export interface GrantRelation extends QualifiedName {
  kind: RelationKind;
}

/** The objects a role is granted on, as found in the catalog by the provisioner. */
export interface GrantObjects {
  /** Relations in the profile's schemas (or its listed tables). */
  relations: readonly GrantRelation[];
  /** Sequences the relations' column defaults use (serial); identity columns need none. */
  sequences: readonly QualifiedName[];
}

/**
 * Bounds on a role's sessions, in milliseconds. The relay holds every session to them, whatever
 * it SETs; they are also the role's defaults (ALTER ROLE … SET), a second layer for sessions
 * that do not go through the relay (a role can change its own settings with SET).
 */
export interface SessionBounds {
  /** `statement_timeout`: a statement cannot usefully outlive the call that ran it. */
  statementTimeoutMs: number;
  /** `idle_in_transaction_session_timeout`: an open transaction holds its locks while idle. */
  idleInTransactionTimeoutMs: number;
  /** `idle_session_timeout`: a session-level advisory lock or LISTEN lives as long as its session. */
  idleSessionTimeoutMs: number;
}

/** The profile's default `timeouts.call`, for the bounds when no call timeout is given. */
export const DEFAULT_CALL_TIMEOUT_MS = 600_000;

/** An open transaction idle for this long inside a call is a mistake or an attack. */
export const MAX_IDLE_IN_TRANSACTION_MS = 60_000;

/**
 * The bounds for a profile whose calls may take `callTimeoutMs`: a statement and an idle
 * session at most as long as a call, an idle transaction at most a minute. No lock_timeout:
 * waiting for a lock is part of a statement (statement_timeout bounds it), and lock_timeout
 * only shortens the role's own waits, it frees nothing another client waits for.
 */
export function sessionBounds(callTimeoutMs: number): SessionBounds {
  const call = Math.max(1, Math.ceil(callTimeoutMs));
  return {
    statementTimeoutMs: call,
    idleInTransactionTimeoutMs: Math.min(call, MAX_IDLE_IN_TRANSACTION_MS),
    idleSessionTimeoutMs: call,
  };
}

export interface RoleSpec {
  name: string;
  /** A SCRAM verifier (see scramSha256Verifier); a plaintext password would be hashed by the server. */
  password: string;
  privilege: DatabasePrivilege;
  database: string;
  schemas: readonly string[];
  validUntil: Date;
  connectionLimit: number;
  bounds: SessionBounds;
  comment: RoleComment;
}

/** Relations whose rows can be written through (a materialized view cannot). */
function writable(relation: GrantRelation): boolean {
  return relation.kind !== 'materialized-view';
}

/** `GRANT … ON <kind> a, b, … TO role`, in statements of at most 100 objects. */
function grantOn(
  privileges: string,
  objectType: 'TABLE' | 'SEQUENCE',
  objects: readonly QualifiedName[],
  role: string,
) {
  const out: string[] = [];
  for (let i = 0; i < objects.length; i += 100) {
    const names = objects
      .slice(i, i + 100)
      .map(quoteQualified)
      .join(', ');
    out.push(`GRANT ${privileges} ON ${objectType} ${names} TO ${quoteIdent(role)}`);
  }
  return out;
}

/**
 * The statements that create a sandbox's role and grant it exactly its privilege, in order,
 * meant to run in one transaction:
 * - read: CONNECT on the database, USAGE on the schemas, SELECT on the relations, and
 *   `default_transaction_read_only = on` (a second layer only);
 * - append: + INSERT, and USAGE on the sequences the relations' defaults use;
 * - write: + UPDATE, DELETE;
 * and, at every privilege, the session bounds as the role's defaults.
 * Never TRUNCATE, REFERENCES, TRIGGER, CREATE, TEMP, ownership, membership or EXECUTE.
 */
export function createRoleStatements(spec: RoleSpec, objects: GrantObjects): string[] {
  if (!spec.name.startsWith(ROLE_PREFIX) || Buffer.byteLength(spec.name) > MAX_IDENTIFIER_BYTES) {
    throw new Error(`role name ${JSON.stringify(spec.name)} must start with ${ROLE_PREFIX} and fit 63 bytes`);
  }
  if (!Number.isInteger(spec.connectionLimit) || spec.connectionLimit < 1) {
    throw new Error('the connection limit must be a positive integer');
  }
  if (Number.isNaN(spec.validUntil.getTime())) throw new Error('validUntil must be a valid date');
  const { statementTimeoutMs, idleInTransactionTimeoutMs, idleSessionTimeoutMs } = spec.bounds;
  const bounds = [statementTimeoutMs, idleInTransactionTimeoutMs, idleSessionTimeoutMs];
  // Postgres's timeouts are int milliseconds; 0 would mean "none".
  if (!bounds.every((ms) => Number.isInteger(ms) && ms >= 1 && ms <= 2_147_483_647)) {
    throw new Error('session bounds must be whole milliseconds, from 1 to 2147483647');
  }
  const role = quoteIdent(spec.name);
  const statements = [
    `CREATE ROLE ${role} WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS NOINHERIT` +
      ` CONNECTION LIMIT ${spec.connectionLimit} PASSWORD ${quoteLiteral(spec.password)}` +
      ` VALID UNTIL ${quoteLiteral(isoTime(spec.validUntil))}`,
    `COMMENT ON ROLE ${role} IS ${quoteLiteral(encodeRoleComment(spec.comment))}`,
    `GRANT CONNECT ON DATABASE ${quoteIdent(spec.database)} TO ${role}`,
    `GRANT USAGE ON SCHEMA ${[...new Set(spec.schemas)].map(quoteIdent).join(', ')} TO ${role}`,
    ...grantOn('SELECT', 'TABLE', objects.relations, spec.name),
  ];
  const dml = objects.relations.filter(writable);
  if (spec.privilege === 'read') {
    statements.push(`ALTER ROLE ${role} SET default_transaction_read_only = on`);
  } else {
    statements.push(...grantOn('INSERT', 'TABLE', dml, spec.name));
    statements.push(...grantOn('USAGE', 'SEQUENCE', objects.sequences, spec.name));
    if (spec.privilege === 'write') statements.push(...grantOn('UPDATE, DELETE', 'TABLE', dml, spec.name));
  }
  statements.push(
    `ALTER ROLE ${role} SET statement_timeout = ${spec.bounds.statementTimeoutMs}`,
    `ALTER ROLE ${role} SET idle_in_transaction_session_timeout = ${spec.bounds.idleInTransactionTimeoutMs}`,
    `ALTER ROLE ${role} SET idle_session_timeout = ${spec.bounds.idleSessionTimeoutMs}`,
  );
  return statements;
}

/** Moves a role's VALID UNTIL (a session that outlives the profile's TTL). */
export function renewRoleStatement(name: string, validUntil: Date): string {
  return `ALTER ROLE ${quoteIdent(name)} VALID UNTIL ${quoteLiteral(isoTime(validUntil))}`;
}

/** First step of a drop: no new logins, so a sandbox cannot reconnect while its sessions end. */
export function disableLoginStatement(name: string): string {
  return `ALTER ROLE ${quoteIdent(name)} NOLOGIN`;
}

/** Ends every session of the role (Postgres lets DROP ROLE succeed while they still run). */
export function terminateSessionsQuery(name: string): string {
  return `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = ${quoteLiteral(name)} AND pid <> pg_backend_pid()`;
}

/**
 * After the sessions are gone, in the role's database: DROP OWNED drops whatever it owns and
 * revokes its grants there (REASSIGN would keep a lying server's objects under the admin's
 * name), then the role goes.
 */
export function dropRoleStatements(name: string): string[] {
  const role = quoteIdent(name);
  return [`DROP OWNED BY ${role}`, `DROP ROLE ${role}`];
}

/** Object types a REVOKE … FROM PUBLIC is written for. */
export type RevokeTarget =
  | { type: 'DATABASE'; name: string }
  | { type: 'SCHEMA'; name: string }
  | { type: 'TABLE' | 'SEQUENCE'; name: QualifiedName; columns?: readonly string[] }
  /** `signature` as Postgres prints `oid::regprocedure` (already quoted); several in one statement. */
  | { type: 'ROUTINE'; signature: string | readonly string[] }
  | { type: 'LARGE OBJECT'; oid: number }
  | { type: 'FOREIGN DATA WRAPPER' | 'FOREIGN SERVER'; name: string };

/** `REVOKE <privilege> ON <object> FROM PUBLIC`; `privilege` may be a list (`DELETE, INSERT`). */
export function revokeFromPublicStatement(privilege: string, target: RevokeTarget): string {
  if (!/^[A-Z]+( [A-Z]+)*(, [A-Z]+( [A-Z]+)*)*$/.test(privilege)) throw new Error(`not a privilege: ${privilege}`);
  const grant = (object: string, columns?: readonly string[]) =>
    `REVOKE ${privilege}${columns?.length ? ` (${columns.map(quoteIdent).join(', ')})` : ''} ON ${object} FROM PUBLIC`;
  switch (target.type) {
    case 'DATABASE':
    case 'SCHEMA':
      return grant(`${target.type} ${quoteIdent(target.name)}`);
    case 'TABLE':
    case 'SEQUENCE':
      return grant(`${target.type} ${quoteQualified(target.name)}`, target.columns);
    case 'ROUTINE':
      return grant(`ROUTINE ${typeof target.signature === 'string' ? target.signature : target.signature.join(', ')}`);
    case 'FOREIGN DATA WRAPPER':
    case 'FOREIGN SERVER':
      return grant(`${target.type} ${quoteIdent(target.name)}`);
    case 'LARGE OBJECT':
      return grant(`LARGE OBJECT ${target.oid}`);
  }
}
