import { newestAuditEntries, scanAuditLog, type AuditEntry, type AuditFilter } from '../audit/audit-reader.js';
import { AUDIT_DECISIONS, AUDIT_OUTCOMES, type AuditDecision, type AuditOutcome } from '../audit/audit-record.js';
import { PostgresAuditSink } from '../audit/postgres-sink.js';
import { hintboxEnvironment, processVariables } from '../config/environment.js';
import { redactUrl } from '../util/redact-url.js';
import { renderServerText } from '../util/render-server-text.js';
import { cliLog } from './common.js';
import type { CommandSpec } from './command-spec.js';
import { UsageError } from '../util/hintbox-error.js';
import { printPublicKey, verifyAuditFolder, verifySink } from './audit-verify-command.js';
import { LineOutput } from './line-output.js';

const HELP = `Usage: hintbox audit [filters] [--limit N | --all] [--events] [--json]
       hintbox audit verify [--public-key FILE]... [--sink [--sink-folder ID]]
       hintbox audit key --public
       hintbox audit ship

Lists recorded calls from the audit log, newest first: time, server/tool, decision and who
made it, outcome, duration, tags and arguments. A call without an outcome means hintbox
stopped between forwarding the call and its answer (or the call is still running).

Filters:
  --server S      one server
  --tool T        one tool
  --session ID    one session
  --tag T         calls of tools with this tag
  --decision D    allowed | denied | blocked
  --outcome O     ok | tool-error | error | cancelled | sandbox-died | not-run | none
  --since WHEN    an ISO time, or an age such as 30m, 2h, 7d
  --until WHEN    the same, for records before it
  --limit N       the newest N records (default 100)
  --all           every matching record, streamed oldest hintbox process first
  --events        also approvals asked and answered, hint violations, narrowed pins,
                  sandbox starts and stops
  --json          one JSON object per line (full arguments)

verify checks every hash chain of the log and prints where one breaks (a line changed,
removed, inserted or moved; a file missing), then holds each chain against its signed
checkpoints (checkpoints.jsonl in the folder): a chain without one, its tail cut, its newest
files deleted, rewritten with fresh hashes, forged, or a checkpoint altered, removed or put
back from an old copy, is reported with file and line: exit 1 if anything is. Records after
an open chain's last checkpoint (hintbox killed, or still running) are printed as NOT YET
COVERED, not as valid, and do not fail. A last line without its newline (a write cut off by a
crash or a full disk) is printed as torn, not as a break, when nothing links to it.
  --public-key FILE  check the checkpoints with this public key (PEM; repeat it for the
                     keys before a rotation): an auditor needs nothing else. Default:
                     hintbox's own key (HINTBOX_AUDIT_KEY, or audit-key.pem in the state folder)
  --sink             hold the folder against the checkpoints the Postgres at
                     HINTBOX_DATABASE_URL holds of it (shipped by "hintbox run" and
                     "hintbox audit ship"), then those of its file not shipped yet: a chain
                     deleted together with its checkpoint lines, or the folder rolled back
                     to an older copy, is reported too
  --sink-folder ID   the folder's name in the sink (default: this host and the folder's
                     real path, HOST:/PATH, as verify prints it): to verify a copy elsewhere

key --public prints the public key of hintbox's audit signing key (made at first use), for an
auditor to verify a copy of the folder with.

ship copies what the Postgres at HINTBOX_DATABASE_URL does not have yet of the log into it
(tables hintbox.audit_log and hintbox.audit_shipped, and the signed checkpoints in
hintbox.audit_checkpoints; idempotent), as "hintbox run" does in the background: for a log written while the database was down, or by runs without the variable.
A line the database refuses (a damaged file) is named with its file and line; its chain waits
there, the others are shipped; exit 1.

The log is in HINTBOX_AUDIT_DIR (default: audit/ in HINTBOX_STATE_DIR,
~/.local/state/hintbox), one chain of files per hintbox process.`;

export const auditCommand: CommandSpec = {
  help: HELP,
  options: {
    server: { type: 'string' },
    tool: { type: 'string' },
    session: { type: 'string' },
    tag: { type: 'string' },
    decision: { type: 'string' },
    outcome: { type: 'string' },
    since: { type: 'string' },
    until: { type: 'string' },
    limit: { type: 'string' },
    all: { type: 'boolean' },
    events: { type: 'boolean' },
    json: { type: 'boolean' },
    'public-key': { type: 'string', multiple: true },
    public: { type: 'boolean' },
    sink: { type: 'boolean' },
    'sink-folder': { type: 'string' },
  },
  async run({ positionals, values }) {
    const dir = hintboxEnvironment().auditDir;
    if (positionals[0] === 'verify') {
      if (positionals.length > 1) throw new UsageError(`audit verify: unexpected argument ${positionals[1]}`);
      return verifyAuditFolder(
        dir,
        (values['public-key'] as string[] | undefined) ?? [],
        processVariables().HINTBOX_AUDIT_DIR !== undefined,
        verifySink(values),
      );
    }
    if (positionals[0] === 'key') {
      if (positionals.length > 1) throw new UsageError(`audit key: unexpected argument ${positionals[1]}`);
      return printPublicKey(values);
    }
    if (positionals[0] === 'ship') {
      if (positionals.length > 1) throw new UsageError(`audit ship: unexpected argument ${positionals[1]}`);
      const url = hintboxEnvironment().databaseUrl;
      if (!url) throw new UsageError('audit ship: set HINTBOX_DATABASE_URL to the Postgres to ship to');
      const sink = new PostgresAuditSink({ url, dir, log: cliLog });
      try {
        const { lines, checkpoints, held } = await sink.shipOnce();
        process.stdout.write(
          `${lines} line(s) and ${checkpoints} checkpoint(s) of ${dir} shipped to ${redactUrl(url)}\n`,
        );
        // Each was logged with its file and line; the other chains are shipped all the same.
        if (held.length > 0) cliLog.error(`audit ship: ${held.length} chain(s) wait at a line the database refused`);
        return held.length > 0 ? 1 : 0;
      } catch (error) {
        throw new Error(`audit ship: ${redactUrl(url)}: ${(error as Error).message}`);
      } finally {
        await sink.close();
      }
    }
    if (positionals.length) throw new UsageError(`audit: unexpected argument ${positionals[0]} (verify, key, ship?)`);
    const filter = auditFilter(values);
    const format = values.json ? (e: AuditEntry) => JSON.stringify(e) : formatAuditEntry;
    const out = new LineOutput();
    let skipped: number;
    if (values.all) {
      if (values.limit !== undefined) throw new UsageError('audit: --all and --limit exclude each other');
      let any = false;
      ({ skipped } = await scanAuditLog(dir, filter, (entry) => {
        any = true;
        return out.write(format(entry));
      }));
      if (!any && !values.json) await out.write('no recorded calls');
    } else {
      const limit = auditLimit(values.limit);
      const newest = await newestAuditEntries(dir, filter, limit);
      skipped = newest.skipped;
      for (const entry of newest.entries) await out.write(format(entry));
      if (newest.entries.length === 0 && !values.json) await out.write('no recorded calls');
    }
    await out.end();
    if (skipped > 0) cliLog.warn(`${skipped} line(s) of the log are not valid records: see hintbox audit verify`);
    return 0;
  },
};

/** Builds the filter from the flags; bad values are usage errors. Pure apart from the clock. */
export function auditFilter(values: Record<string, unknown>, now = new Date()): AuditFilter {
  const filter: AuditFilter = {};
  for (const key of ['server', 'tool', 'session', 'tag'] as const) {
    if (typeof values[key] === 'string') filter[key] = values[key];
  }
  if (typeof values.decision === 'string') {
    if (!(AUDIT_DECISIONS as readonly string[]).includes(values.decision))
      throw new UsageError(`audit: --decision must be allowed, denied or blocked`);
    filter.decision = values.decision as AuditDecision;
  }
  if (typeof values.outcome === 'string') {
    if (values.outcome === 'none') filter.outcome = null;
    else if ((AUDIT_OUTCOMES as readonly string[]).includes(values.outcome))
      filter.outcome = values.outcome as AuditOutcome;
    else throw new UsageError(`audit: --outcome must be one of ${AUDIT_OUTCOMES.join(', ')}, none`);
  }
  if (typeof values.since === 'string') filter.since = parseWhen('since', values.since, now);
  if (typeof values.until === 'string') filter.until = parseWhen('until', values.until, now);
  if (values.events === true) filter.events = true;
  return filter;
}

/** --limit: a positive integer, default 100. */
export function auditLimit(value: unknown): number {
  if (value === undefined) return 100;
  const limit = Number(value);
  if (!Number.isInteger(limit) || limit < 1 || limit > 1_000_000)
    throw new UsageError('audit: --limit must be an integer from 1 to 1000000 (or use --all)');
  return limit;
}

function parseWhen(flag: string, text: string, now: Date): Date {
  const age = /^(\d+)([smhd])$/.exec(text);
  if (age) {
    const unit = { s: 1, m: 60, h: 3600, d: 86400 }[age[2] as 's' | 'm' | 'h' | 'd'];
    return new Date(now.getTime() - Number(age[1]) * unit * 1000);
  }
  const time = new Date(text);
  if (Number.isNaN(time.getTime()))
    throw new UsageError(`audit: --${flag} must be an ISO time or an age such as 2h (got ${text})`);
  return time;
}

/** One line per record; text a server controls (tool names, details) with control characters made visible. */
export function formatAuditEntry(entry: AuditEntry): string {
  if (entry.kind === 'event') {
    const f = entry.fields;
    const where = [f.server, f.tool].filter((x) => typeof x === 'string').join('/');
    const rest = Object.entries(f)
      .filter(([k]) => !['session', 'server', 'tool'].includes(k))
      .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
      .join(' ');
    return [entry.time, entry.type, where || '-', rest].map(renderServerText).join('  ');
  }
  const outcome = entry.outcome ?? 'NO OUTCOME (hintbox stopped during the call, or it is running)';
  const args = JSON.stringify(entry.arguments ?? {});
  // Why a call did not end ok (the denial, the error, the server's last words): at most 160 characters.
  const why = entry.outcome !== 'ok' && entry.detail ? `: ${cut(entry.detail.replace(/\s+/g, ' '), 160)}` : '';
  return [
    entry.time,
    `${entry.server}/${entry.tool}`,
    `${entry.decision} by ${entry.decidedBy}`,
    outcome + why + (entry.hintViolation ? ` (HINT VIOLATION: ${entry.hintViolation})` : ''),
    entry.durationMs === null ? '' : `${entry.durationMs} ms`,
    [...entry.tags, ...entry.claimedTags.map((t) => `${t}?`)].join(',') || '-',
    cut(args, 80),
  ]
    .map(renderServerText)
    .join('  ');
}

function cut(text: string, most: number): string {
  return text.length > most ? `${text.slice(0, most - 3)}...` : text;
}
