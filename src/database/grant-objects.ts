import type { Client } from 'pg';
import { sectionTables, type DatabasePrivilege, type DatabaseSection } from '../profile/database-profile-schema.js';
import type { GrantObjects, GrantRelation, QualifiedName, RelationKind } from './role-grants.js';

const RELKINDS: Readonly<Record<string, RelationKind>> = {
  r: 'table',
  p: 'partitioned-table',
  v: 'view',
  m: 'materialized-view',
  f: 'foreign-table',
};

/**
 * What a new role is granted on, read from the catalogue: the relations of the section's
 * schemas (or only its tables, when it names them) and, for append and write, the sequences
 * their column defaults use. createRoleStatements turns it into GRANTs.
 */
export async function readGrantObjects(
  client: Client,
  section: Pick<DatabaseSection, 'schemas' | 'tables'>,
  privilege: DatabasePrivilege,
): Promise<GrantObjects> {
  const tables = sectionTables(section);
  const { rows } = await client.query<{ oid: number; schema: string; name: string; kind: string }>(
    `SELECT c.oid, n.nspname AS schema, c.relname AS name, c.relkind AS kind
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = ANY($1::text[]) AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
      ORDER BY 2, 3`,
    [section.schemas],
  );
  const wanted = tables ? new Set(tables.map((t) => `${t.schema}\0${t.name}`)) : undefined;
  const selected = rows.filter((r) => !wanted || wanted.has(`${r.schema}\0${r.name}`));
  const relations: GrantRelation[] = selected.map((r) => ({
    schema: r.schema,
    name: r.name,
    kind: RELKINDS[r.kind] ?? 'table',
  }));
  if (privilege === 'read') return { relations, sequences: [] };
  // Sequences the column defaults call (serial, nextval defaults); identity columns need none.
  const { rows: sequences } = await client.query<QualifiedName>(
    `SELECT DISTINCT sn.nspname AS schema, s.relname AS name
       FROM pg_attrdef ad
       JOIN pg_depend d ON d.classid = 'pg_attrdef'::regclass AND d.objid = ad.oid AND d.refclassid = 'pg_class'::regclass
       JOIN pg_class s ON s.oid = d.refobjid AND s.relkind = 'S'
       JOIN pg_namespace sn ON sn.oid = s.relnamespace
      WHERE ad.adrelid = ANY($1::oid[])
      ORDER BY 1, 2`,
    [selected.filter((r) => r.kind !== 'm').map((r) => r.oid)],
  );
  return { relations, sequences };
}
