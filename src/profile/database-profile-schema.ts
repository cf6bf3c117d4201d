import { z } from 'zod';
import { DATABASE_PRIVILEGES } from '../policy/database-privilege.js';

/**
 * The profile's `database` section: which Postgres database the server may use, and at most
 * how. The operator writes it; the server's hints only pick a part of it per sandbox.
 *
 * The admin connection URL carries a superuser's (or a CREATEROLE owner's) password, so it never
 * sits in the profile: the profile names the environment variable that holds it, and any value
 * that looks like a connection URL is refused.
 */

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const CONNECTION_URL = /^\s*postgres(ql)?:\/\//i;
/** Postgres truncates identifiers to 63 bytes; a longer name would silently mean another one. */
const MAX_IDENTIFIER_BYTES = 63;

const INLINE_URL_MESSAGE =
  'a connection URL must not be written in the profile: put it in an environment variable and name that variable in adminUrlEnv';

/** Keys an operator might reach for to write the connection inline; each is refused by name. */
const INLINE_CONNECTION_KEYS = ['url', 'adminUrl', 'connectionString', 'uri', 'dsn', 'password'] as const;

function looksLikeConnectionUrl(value: string): boolean {
  return CONNECTION_URL.test(value);
}

/** A string that is refused first (and only) when it looks like a connection URL. */
function noInlineUrl(): z.ZodString {
  return z.string().refine((v) => !looksLikeConnectionUrl(v), { error: INLINE_URL_MESSAGE, abort: true });
}

/**
 * A Postgres object name exactly as it is in the catalog (case-sensitive, not SQL-folded, no
 * quotes): `app`, `Sales`. Dots are not allowed, so `schema.table` stays unambiguous.
 */
function identifier(what: string) {
  return noInlineUrl()
    .min(1, `expected a ${what} name`)
    .refine((v) => Buffer.byteLength(v, 'utf8') <= MAX_IDENTIFIER_BYTES, `a ${what} name has at most 63 bytes`)
    .refine((v) => !/[\0.]/.test(v), `a ${what} name without "." or NUL`);
}

function tableName() {
  return noInlineUrl()
    .min(1, 'expected a table name')
    .refine((v) => {
      const parts = v.split('.');
      return (
        parts.length <= 2 &&
        parts.every((p) => p.length > 0 && !p.includes('\0') && Buffer.byteLength(p, 'utf8') <= MAX_IDENTIFIER_BYTES)
      );
    }, 'expected table or schema.table (each name at most 63 bytes, no NUL)');
}

/** The highest database privilege, in increasing order. */
export const DatabasePrivilegeSchema = z.enum(DATABASE_PRIVILEGES);
export type DatabasePrivilege = z.infer<typeof DatabasePrivilegeSchema>;

export const DEFAULT_ROLE_TTL_MINUTES = 480;
export const MAX_ROLE_TTL_MINUTES = 1440;
export const DEFAULT_CONNECTION_LIMIT = 10;
export const MAX_CONNECTION_LIMIT = 100;

const INLINE_PASSWORD_MESSAGE =
  'a password must not be written in the profile: the admin URL in the variable named by adminUrlEnv carries it';

const inlineConnectionKeys = Object.fromEntries(
  INLINE_CONNECTION_KEYS.map((key) => [
    key,
    z.never({ error: key === 'password' ? INLINE_PASSWORD_MESSAGE : INLINE_URL_MESSAGE }).optional(),
  ]),
) as Record<(typeof INLINE_CONNECTION_KEYS)[number], z.ZodOptional<z.ZodNever>>;

export const DatabaseSectionSchema = z
  .strictObject({
    /** Name of the environment variable that holds the admin connection URL (never the URL). */
    adminUrlEnv: noInlineUrl().regex(ENV_NAME, 'expected the name of an environment variable (such as HINTBOX_PG_URL)'),
    /** The database the server may use. */
    database: identifier('database'),
    /** Schemas the server may use (USAGE). Names are exact, as in the catalog. */
    schemas: z.array(identifier('schema')).min(1, 'expected at least one schema'),
    /**
     * Tables the server may use: `table` (when one schema is listed) or `schema.table`, with the
     * schema among `schemas`. Default: every table, view and materialized view in `schemas`.
     */
    tables: z.array(tableName()).min(1, 'expected at least one table, or leave tables out').optional(),
    /** The most any sandbox of the server gets: read (SELECT), append (+INSERT), write (+UPDATE, DELETE). */
    privilege: DatabasePrivilegeSchema,
    /**
     * Minutes a session's roles may log in (VALID UNTIL). Default 480 (8 h), at most 1440;
     * a longer session renews them.
     */
    roleTtlMinutes: z.number().int().min(5).max(MAX_ROLE_TTL_MINUTES).default(DEFAULT_ROLE_TTL_MINUTES),
    /** Connections each sandbox's role may hold at once (CONNECTION LIMIT). Default 10, at most 100. */
    connectionLimit: z.number().int().min(1).max(MAX_CONNECTION_LIMIT).default(DEFAULT_CONNECTION_LIMIT),
    ...inlineConnectionKeys,
  })
  .superRefine((section, ctx) => {
    const schemas = new Set(section.schemas);
    if (schemas.size !== section.schemas.length) {
      ctx.addIssue({ code: 'custom', path: ['schemas'], message: 'a schema is listed twice' });
    }
    section.tables?.forEach((table, index) => {
      const parts = table.split('.');
      if (parts.length === 1 && section.schemas.length > 1) {
        ctx.addIssue({
          code: 'custom',
          path: ['tables', index],
          message: `write the table as schema.${table}: several schemas are listed`,
        });
      } else if (parts.length === 2 && !schemas.has(parts[0]!)) {
        ctx.addIssue({
          code: 'custom',
          path: ['tables', index],
          message: `schema ${JSON.stringify(parts[0])} is not in schemas (${section.schemas.join(', ')})`,
        });
      }
    });
  });

/** The `database` section after validation, defaults filled in. */
export type DatabaseSection = Omit<z.infer<typeof DatabaseSectionSchema>, (typeof INLINE_CONNECTION_KEYS)[number]>;

/** A table the profile names, resolved against its schemas. */
export interface TableName {
  schema: string;
  name: string;
}

/** The section's tables as schema + name (an unqualified table is in the only schema). */
export function sectionTables(section: Pick<DatabaseSection, 'schemas' | 'tables'>): TableName[] | undefined {
  return section.tables?.map((table) => {
    const parts = table.split('.');
    return parts.length === 2
      ? { schema: parts[0]!, name: parts[1]! }
      : { schema: section.schemas[0]!, name: parts[0]! };
  });
}
