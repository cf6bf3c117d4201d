import type { AuditCallRecord, AuditEntry } from '../audit/audit-reader.js';
import type { ChainSummary } from '../audit/audit-chain.js';
import { page, whoHtml } from './console-pages.js';
import { html, lines, type Html } from './html.js';

/** The console's pages of the audit trail: the filtered list with the chains' state, and one call's record. Pure. */

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
    case 'request-state':
      return 'refused: the retry did not carry a valid requestState for this call';
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
