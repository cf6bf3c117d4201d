import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { ApprovalRequest, PendingApproval } from '../../src/console/console-approvals.js';
import type { DefinitionToApprove } from '../../src/console/console-pages.js';
import { HintboxConsole } from '../../src/console/console-server.js';
import { silentLogger } from '../../src/util/logger.js';
import { scratchFolder } from '../support/scratch-folder.js';
import { approvalRequest } from './support/approval-request.js';
import { cookiePair, csrfOf, sendTo, setCookieOf, type Headers, type Reply } from './support/console-http.js';

/** A confirmation of a client on stdio (no caller), without tags. */
function consoleRequest(over: Partial<ApprovalRequest> = {}): ApprovalRequest {
  return approvalRequest({ caller: null, tags: [], ...over });
}

/**
 * The console's server on loopback, asked as a forger would: plain HTTP with any headers (no
 * browser enforcing cookie paths or SameSite), so every refusal seen is the server's own.
 */
describe('the console server', () => {
  let hub: HintboxConsole;
  let port: number;
  let origin: string;
  const approved: string[] = [];
  const definition: DefinitionToApprove = {
    server: 'filesystem',
    tool: 'write_file',
    hash: 'a'.repeat(64),
    definition: '{"name":"write_file"}',
    lockFile: '/tmp/filesystem.lock.json',
  };

  before(async () => {
    hub = await HintboxConsole.start({ log: silentLogger, auditDir: scratchFolder('hintbox-console-audit-') });
    origin = hub.origin;
    port = Number(new URL(origin).port);
    hub.addDefinitions({
      pending: () => (approved.includes(definition.hash) ? [] : [definition]),
      approve: (hash) => {
        approved.push(hash);
        return Promise.resolve(true);
      },
    });
  });
  after(() => hub?.close());

  const send = (method: string, path: string, headers: Headers = {}, body?: string): Promise<Reply> =>
    sendTo(port, method, path, headers, body);
  const get = (path: string, headers: Headers = {}): Promise<Reply> => send('GET', path, headers);

  /** A POST of a urlencoded form, as the console's own page makes it unless headers say otherwise. */
  const post = (path: string, form: Record<string, string>, headers: Headers = {}): Promise<Reply> =>
    send(
      'POST',
      path,
      { 'content-type': 'application/x-www-form-urlencoded', origin, ...headers },
      new URLSearchParams(form).toString(),
    );

  const consoleToken = (): string => new URL(hub.link).searchParams.get('token')!;
  async function consoleCookie(): Promise<string> {
    return cookiePair(setCookieOf(await get(`/approvals?token=${consoleToken()}`)));
  }
  /** A fresh confirmation, the cookie its link gives, and the form token of its page. */
  async function confirmation(
    over: Partial<ApprovalRequest> = {},
    mode: 'held' | 'repeat' = 'held',
  ): Promise<{ pending: PendingApproval; cookie: string; csrf: string; answerPath: string }> {
    const pending = hub.approvals.open(consoleRequest(over), mode, 60_000);
    const link = new URL(pending.link);
    const exchanged = await get(link.pathname + link.search);
    assert.equal(exchanged.status, 303);
    const cookie = cookiePair(setCookieOf(exchanged));
    const page = await get(link.pathname, { cookie });
    assert.equal(page.status, 200);
    return { pending, cookie, csrf: csrfOf(page.body), answerPath: `${link.pathname}/answer` };
  }
  const stateOf = (id: string): string | undefined => hub.approvals.get(id)?.state;

  it('refuses every page without a token or a cookie (401), and a wrong token (403)', async () => {
    const { pending } = await confirmation();
    for (const path of ['/approvals', '/audit', '/definitions', `/approvals/${pending.id}`, '/audit/some-id']) {
      const reply = await get(path);
      assert.equal(reply.status, 401, path);
      assert.doesNotMatch(reply.body, /write_file/, `${path}: nothing of the call is shown`);
    }
    assert.equal((await get(`/approvals?token=${'x'.repeat(43)}`)).status, 403);
    assert.equal((await get(`/approvals/${pending.id}?token=${consoleToken()}x`)).status, 403);
    const unanswered = await post(`/approvals/${pending.id}/answer`, { answer: 'approve' });
    assert.equal(unanswered.status, 401, 'no cookie: the answer is refused');
    assert.equal(stateOf(pending.id), 'pending');
  });

  it("exchanges the console's token for a cookie (HttpOnly, SameSite=Strict, Path=/) and an address without it", async () => {
    const reply = await get(`/approvals?token=${consoleToken()}`);
    assert.equal(reply.status, 303);
    assert.equal(reply.headers.location, '/approvals');
    assert.doesNotMatch(reply.headers.location ?? '', /token/);
    const set = setCookieOf(reply);
    const attributes = set.split(';').map((a) => a.trim());
    assert.equal(attributes[0], `hintbox-console=${consoleToken()}`);
    assert.ok(attributes.includes('HttpOnly'), set);
    assert.ok(attributes.includes('SameSite=Strict'), set);
    assert.ok(attributes.includes('Path=/'), set);

    const kept = await get(`/audit?server=filesystem&token=${consoleToken()}&tool=write_file`);
    assert.equal(kept.status, 303);
    assert.equal(kept.headers.location, '/audit?server=filesystem&tool=write_file', 'the other parameters are kept');

    const cookie = cookiePair(set);
    for (const path of ['/approvals', '/audit', '/definitions']) {
      const page = await get(path, { cookie });
      assert.equal(page.status, 200, path);
    }
    assert.match((await get('/audit', { cookie })).body, /No record matches/, 'an empty audit folder');
  });

  // proves: CONSOLE
  it("opens with a confirmation's token its page only", async () => {
    const a = hub.approvals.open(consoleRequest(), 'held', 60_000);
    const b = hub.approvals.open(consoleRequest({ tool: 'edit_file' }), 'held', 60_000);
    const linkA = new URL(a.link);
    const exchanged = await get(linkA.pathname + linkA.search);
    assert.equal(exchanged.status, 303);
    assert.equal(exchanged.headers.location, `/approvals/${a.id}`);
    const set = setCookieOf(exchanged);
    const attributes = set.split(';').map((x) => x.trim());
    assert.equal(attributes[0]!.split('=')[0], `hintbox-approval-${a.id}`);
    assert.ok(attributes.includes(`Path=/approvals/${a.id}`), set);
    assert.ok(attributes.includes('HttpOnly'), set);
    assert.ok(attributes.includes('SameSite=Strict'), set);
    const cookie = cookiePair(set);

    const page = await get(`/approvals/${a.id}`, { cookie });
    assert.equal(page.status, 200);
    assert.match(page.body, /write_file/);
    assert.doesNotMatch(page.body, /href="\/audit"/, 'no navigation to what it does not open');
    // Sent anywhere (a forger's client ignores the cookie's path): it opens nothing else.
    for (const path of ['/approvals', '/audit', '/audit/x', '/definitions', `/approvals/${b.id}`]) {
      assert.equal((await get(path, { cookie })).status, 401, path);
    }
    // The token of A under the cookie name of B, and A's token in B's link: refused.
    const tokenA = linkA.searchParams.get('token')!;
    assert.equal((await get(`/approvals/${b.id}`, { cookie: `hintbox-approval-${b.id}=${tokenA}` })).status, 401);
    assert.equal((await get(`/approvals/${b.id}?token=${tokenA}`)).status, 403);
    assert.equal((await get(`/approvals?token=${tokenA}`)).status, 403, "a confirmation's token is not the console's");
    // Nor may it approve a definition.
    const approve = await post('/definitions/approve', { hash: definition.hash, csrf: csrfOf(page.body) }, { cookie });
    assert.equal(approve.status, 401);
    assert.deepEqual(approved, []);
    assert.equal(stateOf(a.id), 'pending');
    assert.equal(stateOf(b.id), 'pending');
  });

  // proves: CONSOLE
  it('refuses a request naming another host (DNS rebinding) with 421, before any token or cookie', async () => {
    const cookie = await consoleCookie();
    for (const host of [
      `evil.test:${port}`,
      `127.0.0.1:${port + 1}`,
      '127.0.0.1',
      `localhost.evil.test:${port}`,
      `127.0.0.1:${port}.evil.test`,
      `[::1]:${port}`,
      '',
      null,
    ]) {
      // No Host at all: node's server refuses an HTTP/1.1 request without one (400) before the console sees it.
      const refused = host === null ? 400 : 421;
      const page = await get('/approvals', { cookie, host });
      assert.equal(page.status, refused, `Host ${JSON.stringify(host)}`);
      assert.doesNotMatch(page.body, /Waiting for you/);
      const exchange = await get(`/approvals?token=${consoleToken()}`, { host });
      assert.equal(exchange.status, refused, `Host ${JSON.stringify(host)}: no token exchange`);
      assert.equal(exchange.headers['set-cookie'], undefined);
    }
    assert.equal((await get('/approvals', { cookie, host: `localhost:${port}` })).status, 200, 'localhost is ours');
    assert.equal((await get('/approvals', { cookie, host: `127.0.0.1:${port}` })).status, 200);
  });

  // proves: CONSOLE
  it('refuses a POST that is not from its own page, and then nothing changed', async () => {
    const { pending, cookie, csrf, answerPath } = await confirmation();
    const other = await confirmation({ tool: 'edit_file' });
    const refusals: [string, Promise<Reply>, number][] = [
      ['another origin', post(answerPath, { answer: 'approve', csrf }, { cookie, origin: 'http://evil.test' }), 403],
      ['origin null', post(answerPath, { answer: 'approve', csrf }, { cookie, origin: 'null' }), 403],
      [
        'our host, another port',
        post(answerPath, { answer: 'approve', csrf }, { cookie, origin: `http://127.0.0.1:${port + 1}` }),
        403,
      ],
      [
        'https origin',
        post(answerPath, { answer: 'approve', csrf }, { cookie, origin: `https://127.0.0.1:${port}` }),
        403,
      ],
      [
        'no Origin, no Sec-Fetch-Site',
        send(
          'POST',
          answerPath,
          { cookie, 'content-type': 'application/x-www-form-urlencoded' },
          `answer=approve&csrf=${csrf}`,
        ),
        403,
      ],
      [
        'no Origin, Sec-Fetch-Site cross-site',
        send(
          'POST',
          answerPath,
          { cookie, 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'cross-site' },
          `answer=approve&csrf=${csrf}`,
        ),
        403,
      ],
      [
        'no Origin, Sec-Fetch-Site same-site',
        send(
          'POST',
          answerPath,
          { cookie, 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-site' },
          `answer=approve&csrf=${csrf}`,
        ),
        403,
      ],
      ['no csrf', post(answerPath, { answer: 'approve' }, { cookie }), 403],
      ['an empty csrf', post(answerPath, { answer: 'approve', csrf: '' }, { cookie }), 403],
      ['a wrong csrf', post(answerPath, { answer: 'approve', csrf: `${csrf.slice(0, -2)}xx` }, { cookie }), 403],
      ["another confirmation's csrf", post(answerPath, { answer: 'approve', csrf: other.csrf }, { cookie }), 403],
      ['no cookie, the right csrf', post(answerPath, { answer: 'approve', csrf }), 401],
      [
        "another confirmation's cookie and csrf",
        post(answerPath, { answer: 'approve', csrf: other.csrf }, { cookie: other.cookie }),
        401,
      ],
      [
        'a text/plain body',
        send('POST', answerPath, { cookie, origin, 'content-type': 'text/plain' }, `answer=approve&csrf=${csrf}`),
        400,
      ],
      [
        'a JSON body',
        send(
          'POST',
          answerPath,
          { cookie, origin, 'content-type': 'application/json' },
          JSON.stringify({ answer: 'approve', csrf }),
        ),
        400,
      ],
      [
        'a multipart body',
        send(
          'POST',
          answerPath,
          { cookie, origin, 'content-type': 'multipart/form-data; boundary=x' },
          `--x\r\nContent-Disposition: form-data; name="answer"\r\n\r\napprove\r\n--x\r\nContent-Disposition: form-data; name="csrf"\r\n\r\n${csrf}\r\n--x--\r\n`,
        ),
        400,
      ],
      ['no content type', send('POST', answerPath, { cookie, origin }, `answer=approve&csrf=${csrf}`), 400],
      [
        'an oversized form',
        send(
          'POST',
          answerPath,
          { cookie, origin, 'content-type': 'application/x-www-form-urlencoded' },
          `answer=approve&csrf=${csrf}&pad=${'a'.repeat(17 * 1024)}`,
        ),
        400,
      ],
      ['an answer neither approve nor decline', post(answerPath, { answer: 'yes', csrf }, { cookie }), 400],
      ['another host', post(answerPath, { answer: 'approve', csrf }, { cookie, host: `evil.test:${port}` }), 421],
    ];
    for (const [what, reply, status] of refusals) {
      const r = await reply;
      assert.equal(r.status, status, `${what}: ${r.body.slice(0, 200)}`);
      assert.equal(stateOf(pending.id), 'pending', `${what}: the confirmation still waits`);
      assert.equal(stateOf(other.pending.id), 'pending', `${what}: the other one too`);
    }

    // The console's own page: cookie, Origin, form token.
    const answered = await post(answerPath, { answer: 'approve', csrf }, { cookie });
    assert.equal(answered.status, 303, answered.body);
    assert.equal(answered.headers.location, `/approvals/${pending.id}`);
    assert.equal(stateOf(pending.id), 'approved');
    assert.equal(await pending.answer, 'approved');
    assert.match((await get(`/approvals/${pending.id}`, { cookie })).body, /approved here/);
    const again = await post(answerPath, { answer: 'decline', csrf }, { cookie });
    assert.equal(again.status, 409, 'answered once');
    assert.equal(stateOf(pending.id), 'approved');
    assert.equal(stateOf(other.pending.id), 'pending', 'answering one answers no other');
  });

  it('takes an answer without Origin from a same-origin fetch, and from localhost', async () => {
    const first = await confirmation({ tool: 'one' });
    const sameOrigin = await send(
      'POST',
      first.answerPath,
      { cookie: first.cookie, 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' },
      `answer=decline&csrf=${first.csrf}`,
    );
    assert.equal(sameOrigin.status, 303, sameOrigin.body);
    assert.equal(stateOf(first.pending.id), 'declined');
    const second = await confirmation({ tool: 'two' });
    const local = await post(
      second.answerPath,
      { answer: 'approve', csrf: second.csrf },
      { cookie: second.cookie, origin: `http://localhost:${port}`, host: `localhost:${port}` },
    );
    assert.equal(local.status, 303, local.body);
    assert.equal(stateOf(second.pending.id), 'approved');
  });

  it("answers with the console's cookie only with the console page's form token", async () => {
    const cookie = await consoleCookie();
    const { pending, csrf: linkCsrf, answerPath } = await confirmation({ tool: 'three' });
    const page = await get(`/approvals/${pending.id}`, { cookie });
    const consoleCsrf = csrfOf(page.body);
    assert.notEqual(consoleCsrf, linkCsrf, 'form tokens are bound to the cookie that opened the page');
    assert.equal((await post(answerPath, { answer: 'approve', csrf: linkCsrf }, { cookie })).status, 403);
    assert.equal(stateOf(pending.id), 'pending');
    assert.equal((await post(answerPath, { answer: 'approve', csrf: consoleCsrf }, { cookie })).status, 303);
    assert.equal(stateOf(pending.id), 'approved');
  });

  it('approves a definition only from the definitions page of the console', async () => {
    const cookie = await consoleCookie();
    const page = await get('/definitions', { cookie });
    assert.match(page.body, /never approved/);
    const csrf = csrfOf(page.body);
    assert.equal(
      (await post('/definitions/approve', { hash: definition.hash, csrf }, { cookie, origin: 'http://evil.test' }))
        .status,
      403,
    );
    assert.equal((await post('/definitions/approve', { hash: definition.hash }, { cookie })).status, 403);
    assert.equal((await post('/definitions/approve', { hash: definition.hash, csrf })).status, 401);
    assert.deepEqual(approved, [], 'nothing approved by the refused requests');
    assert.equal((await post('/definitions/approve', { hash: 'b'.repeat(64), csrf }, { cookie })).status, 409);
    assert.deepEqual(approved, [], 'a hash no tool has now is not approved');
    const done = await post('/definitions/approve', { hash: definition.hash, csrf }, { cookie });
    assert.equal(done.status, 200);
    assert.match(done.body, /write_file approved: written to/);
    assert.deepEqual(approved, [definition.hash]);
  });

  it('sends a CSP that allows no script, and refuses framing, on every response', async () => {
    const cookie = await consoleCookie();
    const { pending } = await confirmation({ tool: 'four' });
    const replies: [string, Reply][] = [
      ['a page', await get('/approvals', { cookie })],
      ['a confirmation', await get(`/approvals/${pending.id}`, { cookie })],
      ['the audit', await get('/audit', { cookie })],
      ['the stylesheet', await get('/console.css')],
      ['a redirect', await get(`/approvals?token=${consoleToken()}`)],
      ['a 401', await get('/audit')],
      ['a 403', await post(`/approvals/${pending.id}/answer`, { answer: 'approve' }, { cookie, origin: 'http://x' })],
      ['a 404', await get('/nothing', { cookie })],
      ['a 421', await get('/approvals', { host: 'evil.test' })],
    ];
    for (const [what, reply] of replies) {
      const csp = String(reply.headers['content-security-policy'] ?? '');
      const directives = new Map(
        csp
          .split(';')
          .map((d) => d.trim().split(/\s+/))
          .filter((d) => d[0])
          .map((d) => [d[0]!, d.slice(1)]),
      );
      assert.deepEqual(directives.get('default-src'), ["'none'"], `${what}: ${csp}`);
      for (const name of ['script-src', 'script-src-elem', 'script-src-attr']) {
        const sources = directives.get(name);
        assert.ok(sources === undefined || (sources.length === 1 && sources[0] === "'none'"), `${what}: ${name}`);
      }
      assert.deepEqual(directives.get('frame-ancestors'), ["'none'"], what);
      assert.equal(reply.headers['x-frame-options'], 'DENY', what);
      assert.equal(reply.headers['x-content-type-options'], 'nosniff', what);
      assert.equal(reply.headers['cache-control'], 'no-store', what);
      assert.doesNotMatch(reply.body, /<script/i, `${what}: no script in the page`);
    }
    assert.equal(stateOf(pending.id), 'pending');
  });
});
