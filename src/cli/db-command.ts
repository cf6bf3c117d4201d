import { databaseAdminUrl } from '../database/database-env.js';
import { RoleProvisioner } from '../database/role-provisioner.js';
import { cliLog, profileArg } from './common.js';
import type { CommandSpec } from './command-spec.js';
import { UsageError } from '../util/hintbox-error.js';

const HELP = `Usage: hintbox db prepare <profile>

Makes the profile's database safe for hintbox's per-sandbox roles: revokes from PUBLIC the
grants that would let a role do more than its hints allow (TEMP and CREATE on the database,
CREATE on schemas, EXECUTE on SECURITY DEFINER routines, writes on relations, sequences and
large objects, and the large-object creators) and the ways out to the network through Postgres
(EXECUTE on the functions of dblink, postgres_fdw, any foreign-data wrapper's extension and
routines in an untrusted language; USAGE on foreign-data wrappers and servers), in one
transaction. Each statement is printed
before it runs; what remains afterwards (a missing schema, lo_compat_privileges, a REVOKE the
admin may not make) is printed too, and the exit code is 1 while a refusing problem remains.

hintbox run refuses a database with such grants, naming each; run this once per database.
It connects with the admin URL in the environment variable named by database.adminUrlEnv.

Options:
  -h, --help  this help`;

export const dbCommand: CommandSpec = {
  help: HELP,
  options: {},
  async run({ positionals }) {
    const [sub, ...rest] = positionals;
    if (sub !== 'prepare') {
      throw new UsageError(`db: expected "prepare", got ${sub === undefined ? 'nothing' : `"${sub}"`}`);
    }
    const profile = profileArg('db prepare', rest);
    if (!profile.database) {
      throw new UsageError(`db prepare: ${profile.file} has no database section`);
    }
    const adminUrl = databaseAdminUrl({ file: profile.file, database: profile.database });
    await using provisioner = await RoleProvisioner.connect({ adminUrl, section: profile.database, log: cliLog });
    const out = (line: string): boolean => process.stdout.write(line + '\n');
    const { statements, remaining } = await provisioner.prepare((statement) => out(`${statement};`));
    if (statements.length === 0) out(`-- nothing to revoke in database ${JSON.stringify(provisioner.database)}`);
    for (const problem of remaining) {
      out(`-- remains (${problem.severity}): ${problem.message}${problem.statement ? ` (${problem.statement};)` : ''}`);
    }
    const refusing = remaining.filter((p) => p.severity === 'refuse');
    if (refusing.length === 0) out(`-- database ${JSON.stringify(provisioner.database)} is ready for hintbox roles`);
    return refusing.length === 0 ? 0 : 1;
  },
};
