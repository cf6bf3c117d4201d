import { replayJournals } from '../store/audit-journal.js';
import { journalFolder, openStateStore, stateLocation } from '../store/open-state-store.js';
import {
  AUDIT_OUTCOMES,
  type AuditDecision,
  type AuditOutcome,
  type AuditQuery,
  type AuditRecord,
} from '../store/state-store.js';
import { renderServerText } from '../util/render-server-text.js';
import { cliLog } from './common.js';
import type { CommandSpec } from './main.js';
import { UsageError } from './usage-error.js';

const HELP = `Usage: hintbox audit [filters] [--json]

Lists recorded calls, newest first: time, server/tool, decision and who made it, outcome,
duration, tags and arguments. A record without an outcome means hintbox stopped between
forwarding the call and its answer.

Filters:
  --server S      one server
  --tool T        one tool
  --tag T         calls of tools with this tag
  --decision D    allowed | denied | blocked
  --outcome O     ok | tool-error | error | cancelled | sandbox-died | not-run | none
  --since WHEN    an ISO time, or an age such as 30m, 2h, 7d
  --limit N       at most N records (default 100)
  --json          full records (untruncated arguments) as JSON

The audit trail is in Postgres at HINTBOX_DATABASE_URL, else in the embedded store under
HINTBOX_STATE_DIR (default ~/.local/state/hintbox), served by hintbox's state daemon. Records
of runs that crashed before their journal reached the store are written to it first. A run
still going writes its records a few milliseconds after its calls: the last ones may be missing.`;

export const auditCommand: CommandSpec = {
  help: HELP,
  options: {
    server: { type: 'string' },
    tool: { type: 'string' },
    tag: { type: 'string' },
    decision: { type: 'string' },
    outcome: { type: 'string' },
    since: { type: 'string' },
    limit: { type: 'string' },
    json: { type: 'boolean' },
  },
  async run({ positionals, values }) {
    if (positionals.length) throw new UsageError(`audit: unexpected argument ${positionals[0]}`);
    const query = auditQuery(values);
    const location = stateLocation();
    await using store = await openStateStore(location);
    await replayJournals({ dir: journalFolder(location), store: store.audit, log: cliLog });
    const limited = await store.audit.query(query);
    process.stdout.write((values.json ? JSON.stringify(limited, null, 2) : formatAudit(limited)) + '\n');
    return 0;
  },
};

/** Builds the store query from the flags; bad values are usage errors. Pure apart from the clock. */
export function auditQuery(values: Record<string, unknown>, now = new Date()): AuditQuery {
  const query: AuditQuery = {};
  if (typeof values.server === 'string') query.server = values.server;
  if (typeof values.tool === 'string') query.tool = values.tool;
  if (typeof values.tag === 'string') query.tag = values.tag;
  if (typeof values.decision === 'string') {
    if (!['allowed', 'denied', 'blocked'].includes(values.decision))
      throw new UsageError(`audit: --decision must be allowed, denied or blocked`);
    query.decision = values.decision as AuditDecision;
  }
  if (typeof values.outcome === 'string') {
    if (values.outcome === 'none') query.outcome = null;
    else if ((AUDIT_OUTCOMES as readonly string[]).includes(values.outcome))
      query.outcome = values.outcome as AuditOutcome;
    else throw new UsageError(`audit: --outcome must be one of ${AUDIT_OUTCOMES.join(', ')}, none`);
  }
  if (typeof values.since === 'string') query.since = parseSince(values.since, now);
  if (typeof values.limit === 'string') {
    const limit = Number(values.limit);
    if (!Number.isInteger(limit) || limit < 1) throw new UsageError('audit: --limit must be a positive integer');
    query.limit = limit;
  }
  return query;
}

function parseSince(text: string, now: Date): Date {
  const age = /^(\d+)([smhd])$/.exec(text);
  if (age) {
    const unit = { s: 1, m: 60, h: 3600, d: 86400 }[age[2] as 's' | 'm' | 'h' | 'd'];
    return new Date(now.getTime() - Number(age[1]) * unit * 1000);
  }
  const time = new Date(text);
  if (Number.isNaN(time.getTime()))
    throw new UsageError(`audit: --since must be an ISO time or an age such as 2h (got ${text})`);
  return time;
}

/**
 * One line per record. What a server or a client made (tool names and tags, arguments; records
 * of older versions may hold any name) is rendered, so no record can show as two lines or act
 * on the terminal.
 */
export function formatAudit(records: readonly AuditRecord[]): string {
  if (records.length === 0) return 'no recorded calls';
  return records
    .map((r) => {
      const outcome = r.outcome ?? 'NO OUTCOME (hintbox stopped during the call)';
      const args = JSON.stringify(r.arguments ?? {});
      return [
        r.time.toISOString(),
        `${r.server}/${r.tool}`,
        `${r.decision} by ${r.decidedBy}`,
        outcome,
        r.durationMs === null ? '' : `${r.durationMs} ms`,
        r.tags.map((t) => t.name).join(',') || '-',
        args.length > 80 ? `${args.slice(0, 77)}...` : args,
      ]
        .map(renderServerText)
        .join('  ');
    })
    .join('\n');
}
