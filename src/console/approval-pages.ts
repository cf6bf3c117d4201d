import type { ApprovalEntry } from './console-approvals.js';
import { page, whoHtml } from './console-pages.js';
import { html, lines, type Html } from './html.js';
import { isoTime } from '../util/iso-time.js';

/**
 * The console's pages of confirmations: the list (waiting, answered) and one confirmation with
 * everything the person decides on, its preview, and the two buttons. Pure, like every page.
 */

export function approvalsPage(entries: readonly ApprovalEntry[]): string {
  const pending = entries.filter((e) => e.state === 'pending');
  const answered = entries.filter((e) => e.state !== 'pending');
  const row = (e: ApprovalEntry): Html =>
    html`<tr>
      <td>${isoTime(e.askedAt)}</td>
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
            (until ${isoTime(entry.expiresAt)}).
          </p>`
      : html`<p class="${entry.state}">
          ${stateText(entry)}${entry.answeredAt ? ` at ${isoTime(entry.answeredAt)}` : ''}.
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
