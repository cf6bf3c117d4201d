import type { SandboxGrant } from '../policy/plan-sandboxes.js';
import { html, lines, type Html } from './html.js';

/**
 * The console's pages: plain server-rendered HTML, no script (the page's Content-Security-Policy
 * allows none), one stylesheet of our own (`console-css.ts`). Everything a server or a client
 * made goes through `html` (rendered, then escaped). Pure: the server (`console-server.ts`)
 * gathers what they show. Here the layout every page shares, the message page and the page of
 * definitions to approve; the confirmations' pages are `approval-pages.ts`, the audit trail's
 * `audit-pages.ts`.
 */

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
export function whoHtml(caller: unknown, client: unknown): Html {
  if (typeof caller !== 'string') return html``;
  return typeof client === 'string' ? html`${caller} <span class="muted">client ${client}</span>` : html`${caller}`;
}
