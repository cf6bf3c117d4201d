import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { ToolListChangedNotificationSchema, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { ensureTestImages, LIAR_IMAGE } from './support/docker.js';
import { hintboxCommand, outcomeOf, runHintbox, writeProfile } from './support/hintbox-process.js';

/** The part of `_meta["io.hintbox/enforced"]` these tests read (README, "What clients are told"). */
interface Enforced {
  version: number;
  annotations: 'enforced' | 'claimed';
  sandbox: { id: string; mounts: { target: string; readOnly: boolean }[]; network: string; database: string | null };
  hints: Record<
    string,
    { claimed: boolean; effective: boolean; holds: boolean; enforced: boolean; reason: string | null }
  >;
}

/**
 * What `tools/list` through `hintbox run` tells a client of each tool's hints (issue 14, part 2):
 * the hints that hold in its sandbox, not the server's claims — clients auto-approve on
 * `readOnlyHint`, so a claim passed on unchanged would auto-approve a liar — and, in `_meta`,
 * hintbox's account of why. The liar claims `{ readOnlyHint: true, openWorldHint: false }` for
 * every annotated tool; its unannotated ones write.
 */
integrationSuite(
  'the hints a client is told under hintbox run',
  { timeout: 300_000, images: [ensureTestImages] },
  (suite) => {
    const workspace = suite.workspace;

    let n = 0;
    const liar = (extra: Record<string, unknown> = {}) => {
      const name = `liar-hints-${process.pid}-${n++}`;
      const profile = {
        name,
        server: { image: LIAR_IMAGE },
        trust: 'trusted',
        mounts: [{ source: workspace, target: '/data' }],
      };
      return { name, profile, file: writeProfile({ ...profile, ...extra }) };
    };
    const listed = async (file: string): Promise<Map<string, Tool>> => {
      await using hintbox = await runHintbox(file);
      return new Map((await hintbox.client.listTools()).tools.map((t) => [t.name, t]));
    };
    const enforcedOf = (tool: Tool | undefined): Enforced => {
      const meta = tool?._meta?.['io.hintbox/enforced'] as Enforced | undefined;
      assert.ok(meta, `${tool?.name} carries _meta["io.hintbox/enforced"]`);
      return meta;
    };

    // proves: ADVERTISED-HINTS
    it('advertises readOnlyHint: false for a read-only claim in a sandbox shared with a writer (split: false), with the reason', async () => {
      const { file } = liar({ split: false });
      const tools = await listed(file);
      const lie = tools.get('write_mounted');
      assert.equal(lie?.annotations?.readOnlyHint, false, 'not the claim: its sandbox can write');
      assert.equal(lie?.annotations?.destructiveHint, true, 'and may overwrite');
      const meta = enforcedOf(lie);
      assert.equal(meta.version, 1);
      assert.equal(meta.annotations, 'enforced');
      assert.deepEqual(meta.hints.readOnlyHint, {
        claimed: true,
        effective: true,
        holds: false,
        enforced: false,
        reason: 'sandbox can write /data',
      });
      assert.deepEqual(meta.sandbox, {
        id: 'rw-offline',
        mounts: [{ target: '/data', readOnly: false }],
        network: 'none',
        database: null,
      });
      assert.equal(JSON.stringify([...tools.values()]).includes(workspace), false, 'no host path reaches the client');
    });

    // proves: ADVERTISED-HINTS
    it('advertises openWorldHint: false for a tool that claims true on a network: none profile', async () => {
      const { file } = liar({ env: { LIAR_VARIANT: 'claims-open-world' } });
      const fetch = (await listed(file)).get('fetch');
      assert.equal(fetch?.annotations?.openWorldHint, false, 'no network in its sandbox: a closed world');
      assert.equal(fetch?.annotations?.readOnlyHint, true, 'its read-only claim holds (a read-only sandbox)');
      const meta = enforcedOf(fetch);
      assert.equal(meta.sandbox.network, 'none');
      assert.deepEqual(meta.hints.openWorldHint, {
        claimed: true,
        effective: true,
        holds: false,
        enforced: true,
        reason: null,
      });
    });

    it("passes the server's claims with annotations: claimed, and still says what holds", async () => {
      const { file } = liar({ split: false, annotations: 'claimed' });
      const tools = await listed(file);
      const lie = tools.get('write_mounted');
      assert.deepEqual(lie?.annotations, { readOnlyHint: true, openWorldHint: false }, 'as the server sent them');
      assert.equal(tools.get('unannotated_write')?.annotations, undefined, 'none sent, none passed');
      const meta = enforcedOf(lie);
      assert.equal(meta.annotations, 'claimed');
      assert.equal(meta.hints.readOnlyHint?.holds, false);
    });

    it('lists the same from the lock file (cold start) as once the server is verified, and tells the client of no change', async () => {
      const { name, profile, file } = liar({ split: false });
      assert.equal((await hintboxCommand(['approve', file, '--all', '--yes'])).code, 0);
      // The same profile and lock file, a server slow to start: the first list is the lock file's.
      writeFileSync(
        file,
        readFileSync(writeProfile({ ...profile, split: false, env: { LIAR_START_DELAY_MS: '2000' } }), 'utf8'),
      );
      await using hintbox = await runHintbox(file);
      let told = 0;
      hintbox.client.setNotificationHandler(ToolListChangedNotificationSchema, () => void told++);
      const cold = (await hintbox.client.listTools()).tools;
      assert.equal(
        /verified .* against its lock file/.test(hintbox.stderr()),
        false,
        `${name}: served before verified`,
      );
      assert.equal(outcomeOf(await hintbox.client.callTool({ name: 'identity', arguments: {} })).ok, true);
      assert.match(hintbox.stderr(), /verified .* against its lock file/);
      await new Promise((resolve) => setTimeout(resolve, 500));
      assert.equal(told, 0, 'no tools/list_changed for an unchanged server');
      const verified = (await hintbox.client.listTools()).tools;
      const hints = (tools: Tool[]) => tools.map((t) => [t.name, t.annotations, t._meta]).sort();
      assert.deepEqual(hints(verified), hints(cold));
      assert.equal(cold.find((t) => t.name === 'write_mounted')?.annotations?.readOnlyHint, false);
    });
  },
);
