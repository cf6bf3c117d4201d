import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, readdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { before, it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { lockFilePath } from '../../src/approvals/lock-file.js';
import { ensureTestImages, eventually, REPO } from './support/docker.js';
import { auditOf, copyOfShippedProfile, hintboxCommand, runHintbox, sandboxFolder } from './support/hintbox-process.js';
import { serve, stop } from './support/serve-process.js';
import { answerOnPage, http, openLink } from './support/console-page.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { scratchFolder } from '../support/scratch-folder.js';

/** Debian's Chromium (CI installs it); HINTBOX_CHROMIUM points elsewhere. */
const CHROMIUM = process.env.HINTBOX_CHROMIUM ?? '/usr/bin/chromium';
/** README's screenshots come from a run with HINTBOX_SCREENSHOTS=1; other runs take them into a temp folder. */
const SCREENSHOTS = process.env.HINTBOX_SCREENSHOTS === '1' ? path.join(REPO, 'docs') : scratchFolder('hintbox-shots-');

interface AuditRow {
  tool: string;
  decision: string;
  decidedBy: string;
  outcome: string | null;
  arguments: { path?: string; content?: string };
}

/** A POST as a forger would send it: any headers, no browser. Resolves with the status. */
async function forge(url: string, headers: Record<string, string>, body = 'answer=approve'): Promise<number> {
  return (await http(url, 'POST', { 'content-type': 'application/x-www-form-urlencoded', ...headers }, body)).status;
}

const textOf = (result: unknown): string =>
  ((result as { content?: { text?: string }[] }).content ?? []).map((c) => c.text ?? '').join('\n');

/**
 * The console end to end, in a real browser (Debian's Chromium through playwright-core) against
 * `hintbox run --console` of the real filesystem server and a client without elicitation: the
 * denial carries the link, the page shows the dry run's diff, approving there lets the repeated
 * call write, declining keeps it out, the audit page shows both, and forged requests change nothing.
 */
integrationSuite('the console in a browser', { timeout: 300_000, images: [ensureTestImages] }, (suite) => {
  let browser: Browser;
  /** Another site the person visits while the console is open (a forger's page). */
  let evil: Server;
  let evilPage = '';
  before(async () => {
    assert.ok(existsSync(CHROMIUM), `no Chromium at ${CHROMIUM}: apt-get install chromium (or set HINTBOX_CHROMIUM)`);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update'],
    });
    suite.defer(() => browser.close());
    evil = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(evilPage);
    });
    await new Promise<void>((resolve) => evil.listen(0, '127.0.0.1', resolve));
    suite.defer(() => evil.close());
  });

  // proves: CONSOLE
  it('approves and declines calls of a client without elicitation, approves definitions, and refuses forgeries', async () => {
    const workspace = sandboxFolder();
    const profile = copyOfShippedProfile('filesystem');
    await using hintbox = await runHintbox(profile, {
      env: { WORKSPACE: workspace },
      confirmations: 'unsupported',
      args: ['--console'],
    });
    const linkIn = (): string | undefined =>
      /console: (http:\/\/127\.0\.0\.1:\d+\/approvals\?token=\S+)/.exec(hintbox.stderr())?.[1];
    await eventually(() => Promise.resolve(linkIn() !== undefined), 15_000, "the console's link on stderr");
    const consoleLink = linkIn()!;
    const origin = new URL(consoleLink).origin;
    let listChanged = 0;
    hintbox.client.setNotificationHandler(ToolListChangedNotificationSchema, () => void listChanged++);

    // The person's browser, holding the console's own link.
    const person: BrowserContext = await browser.newContext({ viewport: { width: 1200, height: 900 } });
    const page: Page = await person.newPage();
    await page.goto(consoleLink);
    assert.equal(new URL(page.url()).search, '', 'the token is exchanged for a cookie and leaves the address');
    assert.match(await page.locator('h1').innerText(), /Approvals/);

    // Definitions: the untrusted server's tools are hidden until approved; approving write_file there serves it.
    assert.deepEqual((await hintbox.client.listTools()).tools, [], 'nothing approved, nothing served');
    await page.goto(`${origin}/definitions`);
    const card = page.locator('section.card', { hasText: 'write_file' }).first();
    assert.match(await card.innerText(), /never approved/);
    await card.getByRole('button', { name: 'Approve write_file' }).click();
    assert.match(await page.locator('.status').innerText(), /write_file approved: written to /);
    const lock = JSON.parse(readFileSync(lockFilePath(profile), 'utf8')) as { tools: Record<string, unknown> };
    assert.deepEqual(Object.keys(lock.tools), ['write_file'], 'the lock file holds exactly what was approved');
    await eventually(() => Promise.resolve(listChanged > 0), 15_000, 'tools/list_changed');
    const served = (await hintbox.client.listTools()).tools.map((t) => t.name);
    assert.deepEqual(served, ['write_file'], 'the approved tool is served from then on');

    // A write: denied, with the page's link; nothing written.
    const call = {
      name: 'write_file',
      arguments: { path: '/workspace/hello.txt', content: 'hello from the console\n' },
    };
    const denied = await hintbox.client.callTool(call);
    assert.equal(denied.isError, true);
    const link = /(http:\/\/127\.0\.0\.1:\d+\/approvals\/[\w-]+\?token=[\w-]+)/.exec(textOf(denied))?.[1];
    assert.ok(link, `the denial carries the page's link: ${textOf(denied)}`);
    assert.equal(existsSync(path.join(workspace, 'hello.txt')), false, 'nothing is written before the approval');

    // A forger's page the person visits submits the approval to the console: refused.
    evilPage = `<form id="f" method="post" action="${new URL(link).origin}${new URL(link).pathname}/answer"><input name="answer" value="approve"></form><script>document.getElementById('f').submit()</script>`;
    const forgery = await person.newPage();
    await forgery.goto(`http://127.0.0.1:${(evil.address() as AddressInfo).port}/`);
    await forgery.waitForURL(/\/answer$/);
    assert.match(await forgery.content(), /Not allowed|Refused/, 'the cross-site submission is refused');
    await forgery.close();
    // Forged by hand: no cookie, a wrong origin, another host name: refused.
    const answer = `${new URL(link).origin}${new URL(link).pathname}/answer`;
    assert.equal(await forge(answer, { origin }), 401, 'without the token or the cookie');
    assert.equal(
      await forge(answer, { host: `evil.test:${new URL(origin).port}` }),
      421,
      'another host name (DNS rebinding)',
    );
    const again = await hintbox.client.callTool(call);
    assert.equal(again.isError, true, 'none of the forgeries approved the call');
    assert.match(textOf(again), /console/, 'the repeat is pointed at the same page');
    assert.equal(existsSync(path.join(workspace, 'hello.txt')), false);

    // The link alone (a fresh browser, no console cookie) opens that page: the call, its arguments and the diff.
    const visitor = await browser.newContext({ viewport: { width: 1200, height: 1000 } });
    const approval = await visitor.newPage();
    await approval.goto(link);
    const body = await approval.locator('main').innerText();
    assert.match(body, /Allow filesystem to run write_file\?/);
    assert.match(body, /"path": "\/workspace\/hello\.txt"/, 'every argument, in full');
    assert.match(body, /added: \/workspace\/hello\.txt/, 'the preview names the added file');
    assert.match(
      await approval
        .locator('pre.diff span.add')
        .allInnerTexts()
        .then((t) => t.join('\n')),
      /\+hello from the console/,
    );
    assert.match(body, /Sandbox\s+rw-offline/);
    mkdirSync(SCREENSHOTS, { recursive: true });
    await approval.screenshot({ path: path.join(SCREENSHOTS, 'console-approval.png'), fullPage: true });
    const audit = await approval.goto(`${origin}/audit`);
    assert.equal(audit?.status(), 401, "a confirmation's link opens its page, not the audit trail");
    await approval.goto(link);
    // Forged with the link's cookie but from another origin: refused.
    const cookies = await visitor.cookies();
    const cookieHeader = cookies.map((c) => `${c.name}=${c.value}`).join('; ');
    assert.equal(await forge(answer, { cookie: cookieHeader, origin: 'http://evil.test' }), 403);
    assert.equal(await forge(answer, { cookie: cookieHeader }), 403, 'no Origin, no Sec-Fetch-Site');
    await approval.getByRole('button', { name: 'Approve' }).click();
    assert.match(await approval.locator('main').innerText(), /approved here/);

    // The repeated call runs once, and the file lands.
    const ran = await hintbox.client.callTool(call);
    assert.notEqual(ran.isError, true, textOf(ran));
    assert.equal(readFileSync(path.join(workspace, 'hello.txt'), 'utf8'), 'hello from the console\n');
    const onceMore = await hintbox.client.callTool(call);
    assert.equal(onceMore.isError, true, 'an approval on the page is used once');

    // Another write, declined on the page: it never lands. Its content is hostile markup and escapes.
    const hostile = {
      name: 'write_file',
      arguments: {
        path: '/workspace/nope\u202etxt.exe',
        content: '<img src=x onerror="document.title=\'pwned\'">\u001b[31mred\nline two\u2028three\n',
      },
    };
    const deniedToo = await hintbox.client.callTool(hostile);
    const declineLink = /(http:\/\/127\.0\.0\.1:\d+\/approvals\/[\w-]+\?token=[\w-]+)/.exec(textOf(deniedToo))?.[1];
    assert.ok(declineLink, textOf(deniedToo));
    await page.goto(declineLink);
    const shown = await page.locator('main').innerText();
    assert.match(shown, /nope\\u202etxt\.exe/, 'the bidi override is shown as an escape');
    assert.match(shown, /\\u001b\[31mred/, 'the ANSI escape is shown, not obeyed');
    assert.match(shown, /<img src=x onerror=/, 'markup is text');
    assert.equal(await page.locator('main img').count(), 0, 'no element was made of it');
    assert.notEqual(await page.title(), 'pwned');
    await page.getByRole('button', { name: 'Decline' }).click();
    assert.match(await page.locator('main').innerText(), /declined here/);
    const declined = await hintbox.client.callTool(hostile);
    assert.equal(declined.isError, true);
    assert.match(textOf(declined), /declined this call on hintbox's console/);
    assert.deepEqual(
      readdirSync(workspace).filter((f) => f.startsWith('nope')),
      [],
      'the declined write never landed',
    );

    // The audit page shows both, with the right decision; its filter finds the declined one.
    await page.goto(`${origin}/audit?server=filesystem`);
    const trail = await page.locator('table').innerText();
    assert.match(trail, /write_file\s+allowed by a person, in the console\s+ok/);
    assert.match(trail, /write_file\s+denied by a person, in the console\s+not-run/);
    assert.match(await page.locator('.status').innerText(), /Every chain holds/);
    await page.screenshot({ path: path.join(SCREENSHOTS, 'console-audit.png'), fullPage: true });
    await page.goto(`${origin}/audit?server=filesystem&decision=denied&outcome=not-run`);
    assert.doesNotMatch(await page.locator('table').innerText(), /allowed by/, 'the filter keeps denied calls only');

    const rows = await auditOf<AuditRow>('filesystem');
    const byConsole = rows.filter((r) => r.decidedBy === 'console');
    assert.deepEqual(
      byConsole.map((r) => [r.decision, r.outcome, r.arguments.path]),
      [
        ['denied', 'not-run', '/workspace/nope\u202etxt.exe'],
        ['allowed', 'ok', '/workspace/hello.txt'],
      ],
      'hintbox audit records who decided: the console',
    );
    await visitor.close();
    await person.close();
  });

  it("serve --console: a client without elicitation is given the page's link; approved there, its repeat runs", async () => {
    const workspace = sandboxFolder();
    const profile = copyOfShippedProfile('filesystem');
    const approved = await hintboxCommand(['approve', profile, '--all', '--yes'], { WORKSPACE: workspace });
    assert.equal(approved.code, 0, approved.stderr);
    const serving = await serve([path.dirname(profile), '--console'], { WORKSPACE: workspace });
    try {
      assert.match(serving.stderr(), /console: http:\/\/127\.0\.0\.1:\d+\/approvals\?token=/);
      const client = new Client({ name: 'no-elicitation', version: '1.0.0' }, { capabilities: {} });
      await client.connect(new StreamableHTTPClientTransport(new URL(`${serving.url}/mcp/filesystem`)));
      const call = { name: 'write_file', arguments: { path: '/workspace/served.txt', content: 'via serve\n' } };
      const denied = await client.callTool(call);
      const link = /(http:\/\/127\.0\.0\.1:\d+\/approvals\/[\w-]+\?token=[\w-]+)/.exec(textOf(denied))?.[1];
      assert.ok(link, textOf(denied));
      assert.equal(existsSync(path.join(workspace, 'served.txt')), false);
      const { cookie, csrf } = await openLink(link);
      assert.ok(csrf, 'the page has its form token');
      assert.equal((await answerOnPage(link, cookie, csrf, 'approve')).status, 303);
      const ran = await client.callTool(call);
      assert.notEqual(ran.isError, true, textOf(ran));
      assert.equal(readFileSync(path.join(workspace, 'served.txt'), 'utf8'), 'via serve\n');
      await client.close();
    } finally {
      await stop(serving);
    }
  });
});
