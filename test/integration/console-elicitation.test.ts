import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { before, it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import {
  ElicitationCompleteNotificationSchema,
  type ClientCapabilities,
  type ElicitRequest,
  type ElicitResult,
} from '@modelcontextprotocol/sdk/types.js';
import { ensureTestImages, eventually } from './support/docker.js';
import { auditOf, copyOfShippedProfile, hintboxCommand, runHintbox } from './support/hintbox-process.js';
import { answerOnPage, http, openLink } from './support/console-page.js';

interface AuditRow {
  tool: string;
  decision: string;
  decidedBy: string;
  outcome: string | null;
  arguments: { path?: string; content?: string };
}

const textOf = (result: unknown): string =>
  ((result as { content?: { text?: string }[] }).content ?? []).map((c) => c.text ?? '').join('\n');

const CONSOLE_LINK = /(http:\/\/127\.0\.0\.1:\d+\/approvals\/([\w-]+)\?token=[\w-]+)/;

/**
 * The console beside the client's own elicitation (`hintbox run --console` of the real
 * filesystem server, its tools approved): a URL-mode client is sent the page's link and the
 * answer given there decides; a form client gets the form with the link, and whichever answer
 * comes first wins, the other question being withdrawn.
 */
integrationSuite(
  'the console with clients that can be asked',
  { timeout: 600_000, images: [ensureTestImages] },
  (suite) => {
    let profile: string;
    const workspace = suite.workspace;
    before(async () => {
      profile = copyOfShippedProfile('filesystem');
      const approved = await hintboxCommand(['approve', profile, '--all', '--yes'], { WORKSPACE: workspace });
      assert.equal(approved.code, 0, approved.stderr);
    });

    /**
     * `hintbox run` of the approved filesystem profile with `--console` (unless `console: false`),
     * its client declaring these elicitation `modes`, keeping each question in `asked` and
     * answering it with `answer()`.
     */
    const runAsked = (
      modes: NonNullable<ClientCapabilities['elicitation']>,
      asked: ElicitRequest['params'][],
      answer: () => ElicitResult | Promise<ElicitResult>,
      options: { console?: boolean } = {},
    ) =>
      runHintbox(profile, {
        env: { WORKSPACE: workspace },
        capabilities: { elicitation: modes },
        ...(options.console === false ? {} : { args: ['--console'] }),
        onElicit: (params) => {
          asked.push(params);
          return answer();
        },
      });

    const write = (file: string, content: string) => ({
      name: 'write_file',
      arguments: { path: `/workspace/${file}`, content },
    });

    it('URL mode: the client is given the link, the page approves, the call runs and the client is told it is done', async () => {
      const asked: ElicitRequest['params'][] = [];
      await using hintbox = await runAsked({ url: {} }, asked, () => ({ action: 'accept' }));
      const completed: string[] = [];
      hintbox.client.setNotificationHandler(ElicitationCompleteNotificationSchema, (n) => {
        completed.push(n.params.elicitationId);
      });
      const running = hintbox.client.callTool(write('by-link.txt', 'approved on the page\n'));
      running.catch(() => undefined); // awaited below; a failed assertion before must not leave it unhandled
      await eventually(() => Promise.resolve(asked.length > 0), 120_000, 'elicitation/create');
      const question = asked[0]!;
      assert.equal(question.mode, 'url', JSON.stringify(question));
      assert.ok(question.mode === 'url');
      const link = CONSOLE_LINK.exec(question.url)?.[1];
      assert.equal(question.url, link, `the URL is the console's page of this call: ${question.url}`);
      assert.equal(
        question.elicitationId,
        CONSOLE_LINK.exec(question.url)?.[2],
        'the elicitation is named by the page',
      );
      assert.match(question.message, /allow filesystem to run write_file\?/);

      // Accepting the link ran nothing: the page decides.
      await new Promise((r) => setTimeout(r, 500));
      assert.equal(existsSync(path.join(workspace, 'by-link.txt')), false, 'nothing written before the page answers');
      const { cookie, page, csrf } = await openLink(link!);
      assert.match(page, /by-link\.txt/);
      assert.ok(csrf, 'the page waits for an answer');
      const answered = await answerOnPage(link!, cookie, csrf, 'approve');
      assert.equal(answered.status, 303, answered.body);

      const result = await running;
      assert.notEqual(result.isError, true, textOf(result));
      assert.equal(readFileSync(path.join(workspace, 'by-link.txt'), 'utf8'), 'approved on the page\n');
      await eventually(() => Promise.resolve(completed.length > 0), 10_000, 'notifications/elicitation/complete');
      assert.deepEqual(completed, [question.elicitationId]);
      assert.equal(asked.length, 1, 'asked once');

      const [row] = await auditOf<AuditRow>('filesystem');
      assert.deepEqual(
        [row?.tool, row?.decision, row?.decidedBy, row?.outcome, row?.arguments.path],
        ['write_file', 'allowed', 'console', 'ok', '/workspace/by-link.txt'],
      );
    });

    it('URL mode: a client that declines the link denies the call as the person, and the page stops waiting', async () => {
      const asked: ElicitRequest['params'][] = [];
      await using hintbox = await runAsked({ url: {} }, asked, () => ({ action: 'decline' }));
      const result = await hintbox.client.callTool(write('declined-link.txt', 'never\n'));
      assert.equal(result.isError, true);
      assert.match(textOf(result), /the confirmation was declined/);
      assert.doesNotMatch(textOf(result), /on hintbox's console/, 'declined through the client, not on the page');
      assert.equal(existsSync(path.join(workspace, 'declined-link.txt')), false, 'nothing written');
      assert.equal(asked[0]?.mode, 'url');

      const link = asked[0]?.mode === 'url' ? asked[0].url : '';
      const { cookie, page, csrf } = await openLink(link);
      assert.match(page, /answered elsewhere or withdrawn \(answered through the client\)/);
      assert.equal(csrf, undefined, 'no form on a confirmation that does not wait');
      const late = await answerOnPage(link, cookie, 'x', 'approve');
      assert.notEqual(late.status, 303, 'no answer is taken');

      const [row] = await auditOf<AuditRow>('filesystem');
      assert.deepEqual(
        [row?.decision, row?.decidedBy, row?.outcome, row?.arguments.path],
        ['denied', 'person', 'not-run', '/workspace/declined-link.txt'],
      );
    });

    it('URL mode without the console: nobody can be asked, and the audit does not say a person declined', async () => {
      const asked: ElicitRequest['params'][] = [];
      await using hintbox = await runAsked({ url: {} }, asked, () => ({ action: 'accept' }), { console: false });
      const result = await hintbox.client.callTool(write('no-console.txt', 'never\n'));
      assert.equal(result.isError, true);
      assert.match(textOf(result), /cannot be asked/);
      assert.match(textOf(result), /--console/, 'the denial says how to get a page to answer on');
      assert.deepEqual(asked, [], 'no link to give: the client is asked nothing');
      assert.equal(existsSync(path.join(workspace, 'no-console.txt')), false);
      const [row] = await auditOf<AuditRow>('filesystem');
      assert.deepEqual(
        [row?.decision, row?.decidedBy, row?.arguments.path],
        ['denied', 'no-elicitation', '/workspace/no-console.txt'],
      );
    });

    it('form mode: the form carries the link; approved on the page first, the call runs and the form is cancelled', async () => {
      const asked: ElicitRequest['params'][] = [];
      await using hintbox = await runAsked(
        { form: {} },
        asked,
        // The person never answers the form.
        () => new Promise<ElicitResult>(() => undefined),
      );
      // What reaches the client, as sent: the SDK's client ignores a cancellation of request id 0
      // (it tests the id for truthiness), so the handler's signal cannot be relied on to see it.
      const received: { id?: unknown; method?: string; params?: { requestId?: unknown } }[] = [];
      const deliver = hintbox.transport.onmessage;
      hintbox.transport.onmessage = (message) => {
        received.push(message as (typeof received)[number]);
        deliver?.(message);
      };
      const running = hintbox.client.callTool(write('form-page.txt', 'page first\n'));
      running.catch(() => undefined); // awaited below; a failed assertion before must not leave it unhandled
      await eventually(() => Promise.resolve(asked.length > 0), 120_000, 'elicitation/create');
      const form = asked[0]!;
      assert.notEqual(form.mode, 'url');
      const link = CONSOLE_LINK.exec(form.message)?.[1];
      assert.ok(link, `the form's message carries the console's link: ${form.message}`);
      assert.match(form.message, /on a page where you may answer too: http:/);

      const { cookie, csrf } = await openLink(link);
      assert.ok(csrf);
      assert.equal((await answerOnPage(link, cookie, csrf, 'approve')).status, 303);
      const result = await running;
      assert.notEqual(result.isError, true, textOf(result));
      assert.equal(readFileSync(path.join(workspace, 'form-page.txt'), 'utf8'), 'page first\n');
      const formId = received.find((m) => m.method === 'elicitation/create')?.id;
      assert.notEqual(formId, undefined);
      await eventually(
        () =>
          Promise.resolve(
            received.some((m) => m.method === 'notifications/cancelled' && m.params?.requestId === formId),
          ),
        10_000,
        'notifications/cancelled of the form',
      );
      assert.equal(asked.length, 1);
      const [row] = await auditOf<AuditRow>('filesystem');
      assert.deepEqual(
        [row?.decision, row?.decidedBy, row?.outcome, row?.arguments.path],
        ['allowed', 'console', 'ok', '/workspace/form-page.txt'],
      );
    });

    it('form mode: answered in the form first, the call runs and the page no longer waits', async () => {
      const asked: ElicitRequest['params'][] = [];
      let answerForm!: (result: ElicitResult) => void;
      await using hintbox = await runAsked(
        { form: {} },
        asked,
        () => new Promise<ElicitResult>((resolve) => (answerForm = resolve)),
      );
      const running = hintbox.client.callTool(write('form-first.txt', 'form first\n'));
      running.catch(() => undefined); // awaited below; a failed assertion before must not leave it unhandled
      await eventually(() => Promise.resolve(asked.length > 0), 120_000, 'elicitation/create');
      const link = CONSOLE_LINK.exec(asked[0]!.message)?.[1];
      assert.ok(link, asked[0]!.message);
      // The person has the page open (its form token in hand) when the form is answered.
      const { cookie, csrf } = await openLink(link);
      assert.ok(csrf, 'the page waits while the form does');
      answerForm({ action: 'accept', content: { approve: true } });
      const result = await running;
      assert.notEqual(result.isError, true, textOf(result));
      assert.equal(readFileSync(path.join(workspace, 'form-first.txt'), 'utf8'), 'form first\n');

      const url = new URL(link);
      const page = await http(`${url.origin}${url.pathname}`, 'GET', { cookie });
      assert.match(page.body, /answered elsewhere or withdrawn \(answered through the client\)/);
      assert.doesNotMatch(page.body, /name="csrf"/, 'no buttons any more');
      const late = await answerOnPage(link, cookie, csrf, 'decline');
      assert.equal(late.status, 409, 'a late answer on the page is refused');

      const [row] = await auditOf<AuditRow>('filesystem');
      assert.deepEqual(
        [row?.decision, row?.decidedBy, row?.outcome, row?.arguments.path],
        ['allowed', 'person', 'ok', '/workspace/form-first.txt'],
      );
    });
  },
);
