import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { before, it } from 'node:test';
import { chromium } from 'playwright-core';
import { parse, stringify } from 'yaml';
import { scratchFolder } from '../support/scratch-folder.js';
import { ensureTestImages, FILESYSTEM_IMAGE } from './support/docker.js';
import { copyOfShippedProfile, HINTBOX_BIN, hintboxTestEnv, sandboxFolder } from './support/hintbox-process.js';
import { inspector, inspectorBin, inspectorWeb, INSPECTOR_VERSION } from './support/inspector.js';
import { liarProfile, serve, textOf, tokensFile, type Serving } from './support/serve-process.js';
import { integrationSuite } from './support/suite.js';

/**
 * MCP Inspector's CLI and web UI (the version a user gets from npm, run on this Node) against
 * hintbox as a user would point it: `hintbox run` as a stdio server, `hintbox serve` over
 * streamable HTTP with a bearer token. The commands are those docs/protocol.md ("Using MCP Inspector") shows.
 */

const NOTE = 'written by the person, read through the Inspector\n';
const FILESYSTEM = `inspected-fs-${process.pid}`;
const LIAR = `inspected-liar-${process.pid}`;
const CHROMIUM = process.env.HINTBOX_CHROMIUM ?? '/usr/bin/chromium';

/** The shipped filesystem profile, trusted (its reads then need no person), on `workspace`. */
function filesystemProfile(workspace: string): Record<string, unknown> {
  const shipped = parse(readFileSync(copyOfShippedProfile('filesystem'), 'utf8')) as Record<string, unknown>;
  return {
    ...shipped,
    name: FILESYSTEM,
    server: { image: FILESYSTEM_IMAGE, args: ['/workspace'] },
    trust: 'trusted',
    mounts: [{ name: 'workspace', source: workspace, target: '/workspace' }],
  };
}

const toolNames = (answer: unknown): string[] =>
  ((answer as { tools?: { name: string }[] } | undefined)?.tools ?? []).map((t) => t.name).sort();

integrationSuite(
  `MCP Inspector ${INSPECTOR_VERSION} (CLI and web UI) against hintbox`,
  { timeout: 600_000, images: [ensureTestImages, async () => void (await inspectorBin())] },
  (suite) => {
    it('lists and calls the tools of `hintbox run` as a stdio server: a read answers the file, a write is refused as hintbox says', async () => {
      const workspace = sandboxFolder();
      writeFileSync(path.join(workspace, 'note.txt'), NOTE);
      const profile = path.join(scratchFolder('hintbox-inspector-profile-'), 'filesystem.yaml');
      writeFileSync(profile, stringify(filesystemProfile(workspace)));
      // As a user types it: `mcp-inspector --cli -e K=V … hintbox run <profile> --method …`.
      const env = Object.entries(hintboxTestEnv()).flatMap(([key, value]) => ['-e', `${key}=${value}`]);
      const server = [...env, process.execPath, HINTBOX_BIN, 'run', profile];

      const listed = await inspector([...server, '--method', 'tools/list']);
      assert.equal(listed.code, 0, listed.stderr);
      assert.ok(toolNames(listed.answer).includes('read_text_file'), listed.stdout);
      assert.ok(toolNames(listed.answer).includes('write_file'), listed.stdout);
      assert.equal(toolNames(listed.answer).length, 14, listed.stdout);

      const read = await inspector([
        ...server,
        ...['--method', 'tools/call', '--tool-name', 'read_text_file', '--tool-arg', 'path=/workspace/note.txt'],
      ]);
      assert.equal(read.code, 0, read.stderr);
      assert.equal(textOf(read.answer), NOTE);

      // A destructive tool needs a person, and the Inspector's CLI can be asked nothing: hintbox's
      // refusal is the answer the user sees, and nothing is written.
      const write = await inspector([
        ...server,
        ...['--method', 'tools/call', '--tool-name', 'write_file'],
        ...['--tool-arg', 'path=/workspace/note.txt', 'content=overwritten'],
      ]);
      assert.notEqual(write.code, 0, 'a tool that answered isError: the Inspector exits non-zero');
      assert.equal((write.answer as { isError?: boolean }).isError, true, write.stdout);
      assert.match(
        textOf(write.answer),
        /^hintbox denied write_file: it needs a person's confirmation .*this client cannot be asked \(no MCP elicitation\)/,
      );
      assert.equal(readFileSync(path.join(workspace, 'note.txt'), 'utf8'), NOTE);
    });

    suite.describe('hintbox serve with a bearer token', (group) => {
      const TOKEN = `inspector-token-${process.pid}`;
      let serving: Serving;
      let workspace: string;
      before(async () => {
        workspace = sandboxFolder();
        writeFileSync(path.join(workspace, 'note.txt'), NOTE);
        const folder = scratchFolder('hintbox-inspector-profiles-');
        writeFileSync(path.join(folder, 'filesystem.yaml'), stringify(filesystemProfile(workspace)));
        // The liar says every tool of it is read-only: write_mounted lands where the folder is read-only.
        writeFileSync(path.join(folder, 'liar.yaml'), stringify(liarProfile(LIAR, workspace)));
        serving = group.use(await serve([folder, '--tokens', tokensFile([{ name: 'inspector', token: TOKEN }])]));
      });
      /** `mcp-inspector --cli <url> --transport http --header "Authorization: Bearer …" --method …`. */
      const over = (server: string, header = `Authorization: Bearer ${TOKEN}`) => [
        `${serving.url}/mcp/${server}`,
        ...['--transport', 'http', '--header', header],
      ];

      it('lists and calls with the token: a read answers the file; a write into the read-only sandbox fails EROFS', async () => {
        const listed = await inspector([...over(FILESYSTEM), '--method', 'tools/list']);
        assert.equal(listed.code, 0, listed.stderr);
        assert.equal(toolNames(listed.answer).length, 14, listed.stdout);

        const read = await inspector([
          ...over(FILESYSTEM),
          ...['--method', 'tools/call', '--tool-name', 'read_text_file', '--tool-arg', 'path=/workspace/note.txt'],
        ]);
        assert.equal(read.code, 0, read.stderr);
        assert.equal(textOf(read.answer), NOTE);

        const liarTools = await inspector([...over(LIAR), '--method', 'tools/list']);
        assert.ok(toolNames(liarTools.answer).includes('write_mounted'), liarTools.stdout);
        const write = await inspector([
          ...over(LIAR),
          ...['--method', 'tools/call', '--tool-name', 'write_mounted'],
          ...['--tool-arg', 'path=/data/note.txt', 'content=overwritten'],
        ]);
        assert.notEqual(write.code, 0, write.stdout);
        assert.deepEqual((write.answer as { structuredContent?: unknown }).structuredContent, {
          ok: false,
          error: 'EROFS',
        });
        assert.equal(readFileSync(path.join(workspace, 'note.txt'), 'utf8'), NOTE, 'the file is unchanged');
      });

      it('the web UI, in headless Chromium, connects with the token header, lists the tools and reads the file', async () => {
        assert.ok(
          existsSync(CHROMIUM),
          `no Chromium at ${CHROMIUM}: apt-get install chromium (or set HINTBOX_CHROMIUM)`,
        );
        const [url, , transport, , header] = over(FILESYSTEM);
        await using web = await inspectorWeb(['--server-url', url!, '--transport', transport!, '--header', header!]);
        const browser = await chromium.launch({
          executablePath: CHROMIUM,
          args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update'],
        });
        try {
          const page = await browser.newPage();
          await page.goto(web.url);
          // The server's card has a switch that connects it; then its Tools tab, a tool, a form.
          await page.locator('.mantine-Switch-track').first().click();
          await page.getByText('Connected', { exact: true }).waitFor({ timeout: 120_000 });
          await page.getByText('Tools', { exact: true }).first().click();
          await page.getByText('Tools (14)', { exact: true }).waitFor();
          await page.getByText('read_text_file', { exact: true }).click();
          await page.getByRole('textbox', { name: /^path/ }).fill('/workspace/note.txt');
          await page.getByText('Execute Tool').click();
          await page.getByText(NOTE.trim(), { exact: true }).first().waitFor({ timeout: 60_000 });
        } finally {
          await browser.close();
        }
      });

      it('without the token, or with a wrong one, the Inspector is refused and lists nothing', async () => {
        for (const args of [
          [`${serving.url}/mcp/${FILESYSTEM}`, '--transport', 'http'],
          over(FILESYSTEM, 'Authorization: Bearer not-the-token'),
        ]) {
          // Refused with 401, the Inspector turns to OAuth, which it cannot do without a terminal.
          const refused = await inspector([...args, '--method', 'tools/list']);
          assert.notEqual(refused.code, 0, refused.stdout);
          assert.equal(refused.answer, undefined, refused.stdout);
          assert.match(refused.stderr, /"code":"auth_required"/);
        }
      });
    });
  },
);
