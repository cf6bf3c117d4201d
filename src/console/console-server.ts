import { createHmac, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  newestAuditEntries,
  scanAuditLog,
  verifyAuditLog,
  type AuditEntry,
  type AuditFilter,
} from '../audit/audit-reader.js';
import { AUDIT_DECISIONS, AUDIT_OUTCOMES, type AuditDecision, type AuditOutcome } from '../audit/audit-record.js';
import type { Logger } from '../util/logger.js';
import { RequestSite } from '../util/request-site.js';
import { ConsoleApprovals, sameText, type ConsoleApprovalsOptions } from './console-approvals.js';
import { approvalPage, approvalsPage } from './approval-pages.js';
import { auditPage, auditRecordPage, type AuditQuery } from './audit-pages.js';
import { CONSOLE_CSS } from './console-css.js';
import { definitionsPage, messagePage, type DefinitionToApprove } from './console-pages.js';

/**
 * The local console: a small HTTP server on 127.0.0.1 (a random port by default) with the
 * pages of confirmations waiting for a person, of the audit trail, and of tool definitions to
 * approve. Who may see what:
 * - the console's token (in the link hintbox prints on stderr at start) opens every page;
 * - a confirmation's own token (in the link a client is given for it) opens that page only:
 *   a link that reaches the model in a denial's text can answer that one call, nothing more;
 * - a token in a link is exchanged at once for a cookie (HttpOnly, SameSite=Strict, scoped to
 *   what it opens) and the address without it (it leaves no trace in the history);
 * - every request must name the console's own host (`127.0.0.1:<port>` or `localhost:<port>`):
 *   a page of another site whose name resolves to 127.0.0.1 (DNS rebinding) is refused;
 * - a request that changes something (POST) must come from the console's own page: its
 *   `Origin` (or, without one, `Sec-Fetch-Site: same-origin`) and a form token bound to the
 *   cookie; without both it is refused and changes nothing.
 * Pages carry no script, and a Content-Security-Policy that allows none.
 */

export interface ConsoleOptions {
  log: Logger;
  /** The audit log's folder (the audit pages read it). */
  auditDir: string;
  /** Default 0: a random free port. */
  port?: number;
  approvals?: Omit<ConsoleApprovalsOptions, 'origin' | 'secret'>;
  /** The console's secret (tokens, links); default: random. `hintbox console` keeps it for the runs. */
  secret?: Buffer;
  /** Where confirmations are kept; default: in memory, for this process's calls (ConsoleApprovals). */
  store?: (origin: string, secret: Buffer) => ApprovalStore;
}

/** What the pages and the calls need of the confirmations (ConsoleApprovals, or SharedApprovals). */
export type ApprovalStore = Pick<
  ConsoleApprovals,
  'open' | 'answer' | 'takeAnswer' | 'waitingFor' | 'get' | 'list' | 'tokenFor' | 'opens' | 'close'
>;

/** A session's tools whose definitions wait for approval (the definitions page). */
export interface DefinitionSource {
  pending(): DefinitionToApprove[];
  /** Writes the definition of this hash into the lock file; false when no tool of this source has it now. */
  approve(hash: string): Promise<boolean>;
}

const CONSOLE_COOKIE = 'hintbox-console';
const approvalCookie = (id: string): string => `hintbox-approval-${id}`;
const MAX_FORM_BYTES = 16 * 1024;
const AUDIT_ROWS = 200;

const SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy':
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'same-origin',
  'cache-control': 'no-store',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
};

export class HintboxConsole {
  readonly approvals: ApprovalStore;
  private readonly sources = new Set<DefinitionSource>();
  readonly secret: Buffer;
  /** Its own address only: `127.0.0.1:<port>` or `localhost:<port>` (serve's check, without names of a proxy). */
  private readonly site = new RequestSite();

  private constructor(
    private readonly server: Server,
    readonly origin: string,
    private readonly options: ConsoleOptions,
  ) {
    this.secret = options.secret ?? randomBytes(32);
    this.approvals =
      options.store?.(origin, this.secret) ??
      new ConsoleApprovals({ ...options.approvals, origin, secret: this.secret });
  }

  /** Listens on 127.0.0.1 (only: the console is for the person at this machine). */
  static async start(options: ConsoleOptions): Promise<HintboxConsole> {
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
    const { port } = server.address() as AddressInfo;
    const hub = new HintboxConsole(server, `http://127.0.0.1:${port}`, options);
    server.on('request', (req, res) => {
      hub.handle(req, res).catch((error: Error) => {
        options.log.error(`console: ${req.method} ${req.url}: ${error.message}`);
        if (!res.headersSent) hub.send(res, 500, messagePage('Error', 'The console failed to answer.', false));
        else res.destroy();
      });
    });
    return hub;
  }

  /** The link that opens every page of the console (print it for the person, never to a client). */
  get link(): string {
    return `${this.origin}/approvals?token=${this.consoleToken}`;
  }

  /** A session's definitions to approve, shown while it runs; returns how to take them off. */
  addDefinitions(source: DefinitionSource): () => void {
    this.sources.add(source);
    return () => this.sources.delete(source);
  }

  async close(): Promise<void> {
    this.approvals.close();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private get consoleToken(): string {
    return createHmac('sha256', this.secret).update('console').digest('base64url');
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (!this.site.hostAllowed(req.headers.host, req.socket)) {
      return this.send(res, 421, messagePage('Wrong address', 'Open the console at the address hintbox gave.', false));
    }
    const url = new URL(req.url ?? '/', this.origin);
    const path = url.pathname;
    if (path === '/console.css' && req.method === 'GET') {
      res.writeHead(200, { ...SECURITY_HEADERS, 'content-type': 'text/css; charset=utf-8' });
      res.end(CONSOLE_CSS);
      return;
    }
    const approvalId = /^\/approvals\/([A-Za-z0-9_-]{1,64})(\/answer)?$/.exec(path)?.[1];
    const cookies = parseCookies(req.headers.cookie);
    const full = sameText(cookies.get(CONSOLE_COOKIE) ?? '', this.consoleToken);

    // A token in the link: exchanged for a cookie, and the address shown without it.
    const token = url.searchParams.get('token');
    if (token !== null && req.method === 'GET') {
      url.searchParams.delete('token');
      const to = url.pathname + (url.search ? url.search : '');
      if (sameText(token, this.consoleToken)) {
        return this.redirect(res, to, cookie(CONSOLE_COOKIE, token, '/'));
      }
      if (approvalId && this.approvals.opens(approvalId, token)) {
        return this.redirect(res, to, cookie(approvalCookie(approvalId), token, `/approvals/${approvalId}`));
      }
      return this.send(
        res,
        403,
        messagePage('Not allowed', 'This link is not valid (or not for this console).', false),
      );
    }
    const mayApproval = (id: string): boolean =>
      full || (this.approvals.get(id) !== undefined && this.approvals.opens(id, cookies.get(approvalCookie(id)) ?? ''));
    const allowed = approvalId ? mayApproval(approvalId) : full;
    if (!allowed) {
      return this.send(
        res,
        401,
        messagePage('Not allowed', 'Open the console with the link hintbox gave (it carries a token).', false),
      );
    }
    const csrf = this.formToken(approvalId && !full ? cookies.get(approvalCookie(approvalId))! : this.consoleToken);

    if (req.method === 'POST') {
      const refusal = this.refusePost(req);
      if (refusal) return this.send(res, 403, messagePage('Refused', refusal, full));
      const form = await readForm(req);
      if (form === undefined) return this.send(res, 400, messagePage('Refused', 'The form could not be read.', full));
      if (!sameText(form.get('csrf') ?? '', csrf)) {
        return this.send(res, 403, messagePage('Refused', 'The form is not from this console page.', full));
      }
      if (approvalId && path.endsWith('/answer'))
        return this.answer(res, approvalId, form.get('answer') ?? undefined, full);
      if (path === '/definitions/approve') return this.approveDefinition(res, form.get('hash') ?? '', csrf);
      return this.send(res, 404, messagePage('Not found', 'No such action.', full));
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      return this.send(res, 405, messagePage('Not allowed', 'Only GET and POST.', full));
    }
    if (path === '/' || path === '') return this.redirect(res, '/approvals');
    if (path === '/approvals') return this.send(res, 200, approvalsPage(this.approvals.list()));
    if (approvalId && !path.endsWith('/answer')) {
      const entry = this.approvals.get(approvalId);
      if (!entry) return this.send(res, 404, messagePage('Not found', 'This confirmation is no longer kept.', full));
      return this.send(res, 200, approvalPage(entry, csrf, full));
    }
    if (path === '/audit') return this.auditList(res, url.searchParams);
    const auditId = /^\/audit\/([A-Za-z0-9_-]{1,80})$/.exec(path)?.[1];
    if (auditId) return this.auditRecord(res, auditId);
    if (path === '/definitions') return this.send(res, 200, definitionsPage(this.definitions(), csrf));
    return this.send(res, 404, messagePage('Not found', 'No such page.', full));
  }

  /** Why a POST is not from the console's own page, or undefined when it is. */
  private refusePost(req: IncomingMessage): string | undefined {
    const origin = req.headers.origin;
    if (origin !== undefined) {
      return this.site.originAllowed(origin, req.headers.host, req.socket)
        ? undefined
        : `A request from another site (${origin}) cannot change anything here.`;
    }
    return req.headers['sec-fetch-site'] === 'same-origin'
      ? undefined
      : 'A request that changes something must come from the console page (no Origin header).';
  }

  private answer(res: ServerResponse, id: string, answer: string | undefined, full: boolean): void {
    if (answer !== 'approve' && answer !== 'decline') {
      return this.send(res, 400, messagePage('Refused', 'Answer approve or decline.', full));
    }
    if (!this.approvals.answer(id, answer === 'approve' ? 'approved' : 'declined')) {
      return this.send(res, 409, messagePage('Too late', 'This confirmation is not waiting any more.', full));
    }
    this.options.log.info(`console: confirmation ${id} ${answer === 'approve' ? 'approved' : 'declined'}`);
    return this.redirect(res, `/approvals/${id}`);
  }

  /** Every session's definitions waiting, once per server and definition (serve has several sessions of a server). */
  private definitions(): DefinitionToApprove[] {
    const seen = new Map<string, DefinitionToApprove>();
    for (const source of this.sources) {
      for (const d of source.pending()) if (!seen.has(`${d.server}\0${d.hash}`)) seen.set(`${d.server}\0${d.hash}`, d);
    }
    return [...seen.values()];
  }

  private async approveDefinition(res: ServerResponse, hash: string, csrf: string): Promise<void> {
    const shown = this.definitions().find((d) => d.hash === hash);
    let approved = false;
    // Every session that has it serves it from now on (each writes the same entry: idempotent).
    for (const source of [...this.sources]) {
      if (source.pending().some((d) => d.hash === hash)) approved = (await source.approve(hash)) || approved;
    }
    if (shown && approved) {
      this.options.log.info(`console: ${shown.server} tool ${shown.tool} approved into ${shown.lockFile}`);
      return this.send(
        res,
        200,
        definitionsPage(this.definitions(), csrf, `${shown.tool} approved: written to ${shown.lockFile}.`),
      );
    }
    return this.send(
      res,
      409,
      messagePage('Not approved', 'No tool has this definition now (it changed, or was approved already).', true),
    );
  }

  private async auditList(res: ServerResponse, params: URLSearchParams): Promise<void> {
    const query: AuditQuery = {
      ...optional('server', params.get('server')),
      ...optional('tool', params.get('tool')),
      ...optional('decision', params.get('decision')),
      ...optional('outcome', params.get('outcome')),
      ...(params.get('violations') === '1' ? { violations: true } : {}),
    };
    const filter: AuditFilter = { events: true };
    if (query.server) filter.server = query.server;
    if (query.tool) filter.tool = query.tool;
    if (query.decision && (AUDIT_DECISIONS as readonly string[]).includes(query.decision)) {
      filter.decision = query.decision as AuditDecision;
    }
    if (query.outcome === 'none') filter.outcome = null;
    else if (query.outcome && (AUDIT_OUTCOMES as readonly string[]).includes(query.outcome)) {
      filter.outcome = query.outcome as AuditOutcome;
    }
    const wanted = (e: AuditEntry): boolean =>
      !query.violations ||
      (e.kind === 'call' ? e.hintViolation !== null : e.type === 'hint.violation' || e.type === 'egress.denied');
    const { entries } = await newestAuditEntries(this.options.auditDir, filter, AUDIT_ROWS * 2).catch(() => ({
      entries: [] as AuditEntry[],
    }));
    const chains = await verifyAuditLog(this.options.auditDir).catch((error: Error) => ({ error: error.message }));
    return this.send(res, 200, auditPage(entries.filter(wanted).slice(0, AUDIT_ROWS), query, chains));
  }

  private async auditRecord(res: ServerResponse, id: string): Promise<void> {
    let found: AuditEntry | undefined;
    await scanAuditLog(this.options.auditDir, {}, (entry) => {
      if (entry.kind === 'call' && entry.id === id) found = entry;
    });
    if (found?.kind !== 'call') return this.send(res, 404, messagePage('Not found', 'No call has this id.', true));
    return this.send(res, 200, auditRecordPage(found));
  }

  private send(res: ServerResponse, status: number, body: string): void {
    res.writeHead(status, { ...SECURITY_HEADERS, 'content-type': 'text/html; charset=utf-8' });
    res.end(body);
  }

  private redirect(res: ServerResponse, to: string, setCookie?: string): void {
    // Always a path of this console: `//host/…` would send the browser to another site.
    const location = `/${to.replace(/^[/\\]+/, '')}`;
    res.writeHead(303, { ...SECURITY_HEADERS, location, ...(setCookie ? { 'set-cookie': setCookie } : {}) });
    res.end();
  }

  /** The form token of a page: bound to the cookie that opened it. */
  private formToken(cookieValue: string): string {
    return createHmac('sha256', this.secret).update(`form:${cookieValue}`).digest('base64url');
  }
}

function optional<K extends string>(key: K, value: string | null): { [P in K]?: string } {
  return value ? ({ [key]: value } as { [P in K]?: string }) : {};
}

function cookie(name: string, value: string, path: string): string {
  return `${name}=${value}; Path=${path}; HttpOnly; SameSite=Strict`;
}

function parseCookies(header: string | undefined): Map<string, string> {
  const out = new Map<string, string>();
  for (const part of (header ?? '').split(';')) {
    const at = part.indexOf('=');
    if (at > 0) out.set(part.slice(0, at).trim(), part.slice(at + 1).trim());
  }
  return out;
}

/** A urlencoded form of at most MAX_FORM_BYTES; undefined when it is not one. */
async function readForm(req: IncomingMessage): Promise<URLSearchParams | undefined> {
  const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/x-www-form-urlencoded') return undefined;
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_FORM_BYTES) return undefined;
    chunks.push(chunk);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}
