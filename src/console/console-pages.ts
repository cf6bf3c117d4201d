import type { SandboxGrant } from '../policy/plan-sandboxes.js';
import type { AuditCallRecord, AuditEntry } from '../audit/audit-reader.js';
import type { ChainSummary } from '../audit/audit-chain.js';
import type { ApprovalEntry } from './approval-desk.js';
import { html, lines, type Html } from './html.js';

/**
 * The console's pages: plain server-rendered HTML, no script (the page's Content-Security-Policy
 * allows none), one stylesheet of our own. Everything a server or a client made goes through
 * `html` (rendered, then escaped). Pure: the server (`console-server.ts`) gathers what they show.
 */

export const CONSOLE_CSS = `
:root { color-scheme: light; --fg:#1d232a; --muted:#5b6570; --line:#d8dde3; --bg:#f6f7f9; --add:#e6f6ea; --add-fg:#116329; --del:#fdecec; --del-fg:#a01c1c; --hunk:#eef3fb; --warn:#fff4d6; --warn-line:#e0b400; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
header { background: #1d232a; color: #fff; padding: 10px 24px; display: flex; gap: 24px; align-items: baseline; }
header strong { font-size: 17px; letter-spacing: .3px; }
header nav a { color: #cfd6de; margin-right: 16px; text-decoration: none; }
header nav a.here { color: #fff; border-bottom: 2px solid #fff; }
main { max-width: 1100px; margin: 0 auto; padding: 20px 24px 40px; }
h1 { font-size: 21px; margin: 4px 0 14px; }
h2 { font-size: 16px; margin: 22px 0 8px; }
section.card { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 14px 18px; margin-bottom: 14px; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; margin: 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; }
.warning { background: var(--warn); border-left: 4px solid var(--warn-line); padding: 8px 12px; margin: 6px 0; }
pre { background: #fbfcfd; border: 1px solid var(--line); border-radius: 4px; padding: 10px; overflow: auto; max-height: 480px; font: 13px/1.4 ui-monospace, "DejaVu Sans Mono", monospace; margin: 6px 0; white-space: pre; }
pre.diff { padding: 0; }
pre.diff span { display: block; padding: 0 10px; }
pre.diff .add { background: var(--add); color: var(--add-fg); }
pre.diff .del { background: var(--del); color: var(--del-fg); }
pre.diff .hunk { background: var(--hunk); color: #2a4f8a; }
pre.diff .file { font-weight: 600; background: #f0f2f5; }
ul.changes { margin: 4px 0; padding-left: 20px; }
.tag { display: inline-block; background: #e8ecf1; border-radius: 10px; padding: 0 8px; font-size: 13px; margin-right: 4px; }
table { border-collapse: collapse; width: 100%; background: #fff; border: 1px solid var(--line); }
th, td { text-align: left; padding: 6px 10px; border-bottom: 1px solid var(--line); vertical-align: top; font-size: 14px; }
th { background: #f0f2f5; font-weight: 600; }
.allowed, .approved, .ok { color: var(--add-fg); font-weight: 600; }
.denied, .declined, .blocked, .broken { color: var(--del-fg); font-weight: 600; }
.pending { color: #8a5a00; font-weight: 600; }
.actions { display: flex; gap: 12px; margin-top: 12px; }
button { font: inherit; padding: 8px 20px; border-radius: 5px; border: 1px solid #9aa4ae; background: #fff; cursor: pointer; }
button.approve { background: #1a7f37; border-color: #1a7f37; color: #fff; }
button.decline { background: #fff; border-color: #cf222e; color: #cf222e; }
form.filters { display: flex; flex-wrap: wrap; gap: 10px; align-items: end; margin-bottom: 12px; }
form.filters label { display: flex; flex-direction: column; font-size: 13px; color: var(--muted); }
form.filters input, form.filters select { font: inherit; padding: 4px 6px; }
.muted { color: var(--muted); }
.status { padding: 8px 12px; border-radius: 4px; margin-bottom: 12px; }
.status.ok { background: var(--add); }
.status.broken { background: var(--del); }
`;

export type ConsoleSection = 'approvals' | 'audit' | 'definitions';

/** Whole pages: the layout. `full`: the visitor holds the console's own token (all sections). */
export function page(title: string, section: ConsoleSection | null, body: Html, full: boolean): string {
  const nav = full
    ? html`<nav>
        <a href="/approvals" class="${section === 'approvals' ? 'here' : ''}">Approvals</a>
        <a href="/audit" class="${section === 'audit' ? 'here' : ''}">Audit</a>
        <a href="/definitions" class="${section === 'definitions' ? 'here' : ''}">Definitions</a>
      </nav>`
    : html``;
  return `<!doctype html>${
    html`<html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <meta name="referrer" content="same-origin" />
        <title>${title} · hintbox console</title>
        <link rel="stylesheet" href="/console.css" />
      </head>
      <body>
        <header><strong>hintbox</strong>${nav}</header>
        <main>${body}</main>
      </body>
    </html>`.text
  }`;
}

export function messagePage(title: string, text: string, full: boolean): string {
  return page(
    title,
    null,
    html`<h1>${title}</h1>
      <section class="card"><p>${text}</p></section>`,
    full,
  );
}

// — Approvals —

export function approvalsPage(entries: readonly ApprovalEntry[]): string {
  const pending = entries.filter((e) => e.state === 'pending');
  const answered = entries.filter((e) => e.state !== 'pending');
  const row = (e: ApprovalEntry): Html =>
    html`<tr>
      <td>${e.askedAt.toISOString()}</td>
      <td><a href="/approvals/${e.id}">${e.request.server} · ${e.request.tool}</a></td>
      <td>${whoHtml(e.request.caller?.subject, e.request.caller?.client)}</td>
      <td class="${e.state}">${stateText(e)}</td>
    </tr>`;
  const table = (list: readonly ApprovalEntry[]): Html =>
    list.length
      ? html`<table>
          <tr>
            <th>Asked</th>
            <th>Call</th>
            <th>Caller</th>
            <th>State</th>
          </tr>
          ${list.map(row)}
        </table>`
      : html`<p class="muted">None.</p>`;
  return page(
    'Approvals',
    'approvals',
    html`<h1>Approvals</h1>
      <h2>Waiting for you</h2>
      ${table(pending)}
      <h2>Answered</h2>
      ${table(answered)}`,
    true,
  );
}

function stateText(e: ApprovalEntry): string {
  switch (e.state) {
    case 'pending':
      return e.mode === 'repeat' ? 'waiting (the call was refused; approve, then repeat it)' : 'waiting';
    case 'approved':
      return 'approved here';
    case 'declined':
      return 'declined here';
    case 'timeout':
      return 'not answered in time';
    case 'withdrawn':
      return `answered elsewhere or withdrawn${e.note ? ` (${e.note})` : ''}`;
  }
}

/** One confirmation: everything the person decides on, and the two buttons while it waits. */
export function approvalPage(entry: ApprovalEntry, csrf: string, full: boolean): string {
  const r = entry.request;
  const hints = Object.entries(r.effectiveHints)
    .map(([k, v]) => `${k}: ${String(v)}`)
    .join(', ');
  const answer =
    entry.state === 'pending'
      ? html`<form method="post" action="/approvals/${entry.id}/answer" class="actions">
            <input type="hidden" name="csrf" value="${csrf}" />
            <button class="approve" name="answer" value="approve" type="submit">Approve</button>
            <button class="decline" name="answer" value="decline" type="submit">Decline</button>
          </form>
          <p class="muted">
            ${
              entry.mode === 'repeat'
                ? 'The client could not be asked, so this call was refused. After you approve, the same call (same arguments) repeated within a few minutes runs once.'
                : 'The call waits for your answer'
            }
            (until ${entry.expiresAt.toISOString()}).
          </p>`
      : html`<p class="${entry.state}">
          ${stateText(entry)}${entry.answeredAt ? ` at ${entry.answeredAt.toISOString()}` : ''}.
        </p>`;
  return page(
    `${r.tool} of ${r.server}`,
    full ? 'approvals' : null,
    html`<h1>Allow <code>${r.server}</code> to run <code>${r.tool}</code>?</h1>
      <section class="card">
        ${r.warnings.map((w) => html`<div class="warning">WARNING: ${w}</div>`)}
        ${
          r.untrustedBecause
            ? html`<div class="warning">
                WARNING: this server broke a hint earlier in this session: ${r.untrustedBecause}
              </div>`
            : ''
        }
        <dl class="facts">
          <dt>Server</dt>
          <dd>${r.server}</dd>
          <dt>Tool</dt>
          <dd>${r.tool}</dd>
          <dt>Tags</dt>
          <dd>
            ${r.tags.length ? r.tags.map((t) => html`<span class="tag">${t}</span>`) : html`<span class="muted">none</span>`}
          </dd>
          <dt>Why you are asked</dt>
          <dd>${r.reasons.join('; ')}</dd>
          <dt>Effective hints</dt>
          <dd>${hints}</dd>
          <dt>Sandbox</dt>
          <dd><code>${r.sandbox}</code>: ${r.sandboxGrant}</dd>
          ${
            r.caller
              ? html`<dt>Caller</dt>
                  <dd>${r.caller.subject}</dd>
                  ${
                    r.caller.client !== undefined
                      ? html`<dt>Client</dt>
                          <dd>${r.caller.client}</dd>`
                      : ''
                  }`
              : ''
          }
          <dt>Session</dt>
          <dd><code>${r.session}</code></dd>
        </dl>
        ${answer}
      </section>
      <section class="card">
        <h2>Arguments (in full)</h2>
        <pre class="arguments">${lines(JSON.stringify(r.arguments, null, 2))}</pre>
      </section>
      <section class="card">
        <h2>What a dry run changed</h2>
        ${previewView(r.preview)}
      </section>`,
    full,
  );
}

/**
 * The dry run's output, as `CallPreviewer` wrote it (server-made text: file names and
 * contents): a list of the added, removed and changed files, then the diff with colours.
 */
function previewView(preview: ApprovalEntry['request']['preview']): Html {
  if (!preview.available) return html`<p class="muted">${preview.reason}</p>`;
  const all = preview.text.split('\n');
  const files = all.filter((l) => /^(added|removed|changed): /.test(l));
  const classOf = (l: string): string =>
    /^(added|removed|changed): /.test(l)
      ? 'file'
      : l.startsWith('@@')
        ? 'hunk'
        : l.startsWith('+++') || l.startsWith('---')
          ? 'file'
          : l.startsWith('+')
            ? 'add'
            : l.startsWith('-')
              ? 'del'
              : '';
  return html`<p class="muted">
      A copy of the writable folders was given to the same call in a throwaway sandbox without a network. What follows
      is the server's own output: file names and contents as it made them.
    </p>
    ${
      files.length
        ? html`<ul class="changes">
            ${files.map((f) => html`<li>${f}</li>`)}
          </ul>`
        : html`<p>No file changed.</p>`
    }
    <pre class="diff">${all.map((l) => html`<span class="${classOf(l)}">${lines(l)}</span>`)}</pre>`;
}

// — Audit —

export interface AuditQuery {
  server?: string;
  tool?: string;
  decision?: string;
  outcome?: string;
  violations?: boolean;
}

export function auditPage(
  entries: readonly AuditEntry[],
  query: AuditQuery,
  chains: readonly ChainSummary[] | { error: string },
): string {
  const select = (name: string, options: readonly string[], current: string | undefined): Html =>
    html`<select name="${name}">
      <option value="">any</option>
      ${options.map((o) => html`<option value="${o}" ${o === current ? html`selected` : ''}>${o}</option>`)}
    </select>`;
  const status =
    'error' in chains
      ? html`<div class="status broken">The audit log cannot be verified: ${chains.error}</div>`
      : chains.some((c) => c.breaks.length)
        ? html`<div class="status broken">
            BROKEN: ${chains.filter((c) => c.breaks.length).length} of ${chains.length} chain(s) do not hold
            (${chains
              .flatMap((c) => c.breaks.map((b) => `${b.file}:${b.line}: ${b.message}`))
              .slice(0, 5)
              .join('; ')})
          </div>`
        : html`<div class="status ok">
            Every chain holds: ${chains.length} chain(s), ${chains.reduce((n, c) => n + c.lines, 0)}
            line(s)${chains.some((c) => c.torn.length) ? ' (a torn last line where a crash stopped a file)' : ''}.
          </div>`;
  const rows = entries.map((e) =>
    e.kind === 'call'
      ? html`<tr>
          <td>${e.time}</td>
          <td><a href="/audit/${e.id}">${e.server} · ${e.tool}</a></td>
          <td class="${e.decision}">${e.decision} <span class="muted">by ${deciderText(e)}</span></td>
          <td class="${e.outcome ?? ''}">
            ${e.outcome ?? 'no outcome'}${e.hintViolation ? html` <span class="denied">violation</span>` : ''}
          </td>
          <td>${whoHtml(e.caller, e.client)}</td>
          <td class="muted">${e.detail ?? ''}</td>
        </tr>`
      : html`<tr>
          <td>${e.time}</td>
          <td>${textField(e.fields.server)}${typeof e.fields.tool === 'string' ? ` · ${e.fields.tool}` : ''}</td>
          <td colspan="2">${e.type}${eventText(e.fields)}</td>
          <td>${whoHtml(e.fields.caller, e.fields.client)}</td>
          <td class="muted"></td>
        </tr>`,
  );
  return page(
    'Audit',
    'audit',
    html`<h1>Audit trail</h1>
      ${status}
      <form method="get" action="/audit" class="filters">
        <label>Server <input name="server" value="${query.server ?? ''}" /></label>
        <label>Tool <input name="tool" value="${query.tool ?? ''}" /></label>
        <label>Decision ${select('decision', ['allowed', 'denied', 'blocked'], query.decision)}</label>
        <label
          >Outcome
          ${select('outcome', ['ok', 'tool-error', 'error', 'cancelled', 'sandbox-died', 'not-run', 'none'], query.outcome)}</label
        >
        <label
          >Violations only <input type="checkbox" name="violations" value="1" ${query.violations ? html`checked` : ''}
        /></label>
        <button type="submit">Filter</button>
      </form>
      ${
        entries.length
          ? html`<table>
              <tr>
                <th>Time</th>
                <th>Call</th>
                <th>Decision</th>
                <th>Outcome</th>
                <th>Caller</th>
                <th>Detail</th>
              </tr>
              ${rows}
            </table>`
          : html`<p class="muted">No record matches.</p>`
      }`,
    true,
  );
}

function deciderText(call: AuditCallRecord): string {
  switch (call.decidedBy) {
    case 'console':
      return 'a person, in the console';
    case 'person':
      return 'a person, through the client';
    case 'no-elicitation':
      return 'no way to ask (the client has no elicitation)';
    default:
      return call.decidedBy;
  }
}

function textField(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

function eventText(fields: Record<string, unknown>): string {
  const parts: string[] = [];
  if (typeof fields.answer === 'string') parts.push(fields.answer);
  if (typeof fields.by === 'string') parts.push(`in the ${fields.by}`);
  if (typeof fields.violation === 'string') parts.push(fields.violation);
  return parts.length ? `: ${parts.join(' ')}` : '';
}

export function auditRecordPage(call: AuditCallRecord): string {
  const facts: [string, string][] = [
    ['Time', call.time],
    ['Server', call.server],
    ['Tool', call.tool],
    ['Decision', `${call.decision} by ${deciderText(call)}`],
    ['Outcome', call.outcome ?? 'no outcome recorded (hintbox stopped during the call, or it still runs)'],
    ['Detail', call.detail ?? ''],
    ['Hint violation', call.hintViolation ?? 'none seen'],
    ['Sandbox', call.sandbox ?? 'not routed'],
    ['Tags', [...call.tags, ...call.claimedTags].join(', ')],
    ['Caller', call.caller ?? ''],
    ['Client', call.client ?? ''],
    ['Session', call.session],
    ['Pin', call.pin ?? 'unpinned'],
    ['Duration', call.durationMs === null ? '' : `${call.durationMs} ms`],
    ['Attempts', call.attempts === null ? '' : String(call.attempts)],
    ['Effective hints', JSON.stringify(call.effectiveHints)],
    ['Claimed hints', JSON.stringify(call.claimedHints)],
    ['Record id', call.id],
  ];
  return page(
    `${call.tool} at ${call.time}`,
    'audit',
    html`<h1><code>${call.server}</code> · <code>${call.tool}</code></h1>
      <section class="card">
        <dl class="facts">
          ${facts.map(
            ([k, v]) =>
              html`<dt>${k}</dt>
                <dd>${v}</dd>`,
          )}
        </dl>
      </section>
      <section class="card">
        <h2>Arguments</h2>
        <pre>${lines(JSON.stringify(call.arguments, null, 2) ?? 'none')}</pre>
      </section>`,
    true,
  );
}

// — Definitions —

/** A tool whose definition is not the approved one (or was never approved). */
export interface DefinitionToApprove {
  server: string;
  tool: string;
  /** The SHA-256 of the definition shown: the approval is of exactly it. */
  hash: string;
  /** What changed since the approved definition (as `hintbox approve` shows it); absent: never approved. */
  changes?: readonly string[];
  /** The whole definition, as JSON. */
  definition: string;
  lockFile: string;
}

export function definitionsPage(definitions: readonly DefinitionToApprove[], csrf: string, notice?: string): string {
  return page(
    'Definitions',
    'definitions',
    html`<h1>Tool definitions to approve</h1>
      ${notice ? html`<div class="status ok">${notice}</div>` : ''}
      <p class="muted">
        Approving writes the definition into the lock file beside the profile, as <code>hintbox approve</code> does;
        review and commit it.
      </p>
      ${
        definitions.length
          ? definitions.map(
              (d) =>
                html`<section class="card">
                  <h2>
                    <code>${d.server}</code> ·
                    <code>${d.tool}</code> ${d.changes ? 'changed since it was approved' : 'never approved'}
                  </h2>
                  ${
                    d.changes
                      ? html`<p>What changed:</p>
                          <ul class="changes">
                            ${d.changes.map((l) => html`<li><code>${l}</code></li>`)}
                          </ul>
                          <p>The whole definition now:</p>`
                      : ''
                  }
                  <pre>${lines(d.definition)}</pre>
                  <form method="post" action="/definitions/approve" class="actions">
                    <input type="hidden" name="csrf" value="${csrf}" />
                    <input type="hidden" name="hash" value="${d.hash}" />
                    <button class="approve" type="submit">Approve ${d.tool}</button>
                    <span class="muted">into ${d.lockFile}</span>
                  </form>
                </section>`,
            )
          : html`<p class="muted">Every tool served is approved.</p>`
      }`,
    true,
  );
}

/** What a sandbox may do, in a few words (for a confirmation's page). */
export function describeGrant(grant: SandboxGrant): string {
  const mounts = grant.mounts.length
    ? grant.mounts.map((m) => `${m.target} ${m.readOnly ? 'read-only' : 'read-write'}`).join(', ')
    : 'no folder';
  const network =
    grant.network === 'none'
      ? 'no network'
      : grant.network === 'egress'
        ? `network only to ${grant.egress?.hosts.join(', ') || 'nothing'}`
        : 'network';
  return [mounts, network, ...(grant.database ? [`database role: ${grant.database}`] : [])].join('; ');
}

/**
 * A caller as a table cell: its subject, and its client (when its credentials named one) apart,
 * so that a subject spelled like another caller's subject and client reads differently.
 */
function whoHtml(caller: unknown, client: unknown): Html {
  if (typeof caller !== 'string') return html``;
  return typeof client === 'string' ? html`${caller} <span class="muted">client ${client}</span>` : html`${caller}`;
}
