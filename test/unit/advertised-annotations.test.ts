import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  advertisedDefinition,
  advertiser,
  ENFORCED_META_KEY,
  type AnnotationsMode,
  type EnforcedMeta,
} from '../../src/policy/advertised-annotations.js';
import { emptyLock, lockedDefinitions, lockTool } from '../../src/approvals/lock-file.js';
import { HINT_NAMES, type ClaimedHints, type ToolHints } from '../../src/policy/hints.js';
import { DATABASE_PRIVILEGES, type DatabasePrivilege } from '../../src/policy/database-privilege.js';
import { planSandboxes, type Ceiling, type SandboxPlan } from '../../src/policy/plan-sandboxes.js';
import { pinTool } from '../../src/policy/tool-pin.js';

interface Listed {
  name: string;
  title?: string;
  description?: string;
  inputSchema: { type: 'object' };
  annotations?: Record<string, unknown>;
  _meta?: Record<string, unknown>;
}

const filesystem = JSON.parse(readFileSync(new URL('../fixtures/filesystem-tools.json', import.meta.url), 'utf8')) as {
  tools: Listed[];
};

function ceiling(partial: Partial<Ceiling> = {}): Ceiling {
  return {
    mounts: [{ source: '/home/operator/secret-project', target: '/data', mode: 'rw' }],
    network: 'none',
    split: true,
    overrides: {},
    ...partial,
  };
}

function tool(name: string, annotations?: Record<string, unknown>, extra: Partial<Listed> = {}): Listed {
  return { name, inputSchema: { type: 'object' }, ...(annotations ? { annotations } : {}), ...extra };
}

/** Every tool as the client is given it, by name. */
function advertise(tools: Listed[], at: Ceiling, mode: AnnotationsMode = 'enforced'): Map<string, Listed> {
  const plan = planSandboxes(tools, at);
  return advertiseWith(tools, plan, mode);
}

function advertiseWith(tools: Listed[], plan: SandboxPlan, mode: AnnotationsMode): Map<string, Listed> {
  const advertised = advertiser(plan, mode);
  const byName = new Map(tools.map((t) => [t.name, t]));
  return new Map(plan.tools.map((planned) => [planned.name, advertised(byName.get(planned.name)!, planned)]));
}

function metaOf(listed: Listed | undefined): EnforcedMeta {
  const meta = listed?._meta?.[ENFORCED_META_KEY];
  assert.ok(meta, `${listed?.name} has hintbox's _meta`);
  return meta as EnforcedMeta;
}

function hintsOf(listed: Listed | undefined): ToolHints {
  const a = listed?.annotations ?? {};
  return Object.fromEntries(HINT_NAMES.map((h) => [h, a[h]])) as unknown as ToolHints;
}

const READ = { readOnlyHint: true, openWorldHint: false };
const WRITE = { readOnlyHint: false, destructiveHint: true, openWorldHint: false };

describe('advertised annotations: the hints that hold in the sandbox', () => {
  it("keeps the filesystem server's hints where its split sandboxes make them true", () => {
    const out = advertise(filesystem.tools, ceiling());
    const read = out.get('read_text_file');
    assert.deepEqual(hintsOf(read), {
      readOnlyHint: true,
      // Not sent, so the spec's default (it means nothing for a read-only tool): all four explicit.
      destructiveHint: true,
      idempotentHint: false,
      openWorldHint: false,
    });
    assert.equal(read?.title, 'Read Text File', 'other fields as sent');
    const meta = metaOf(read);
    assert.equal(meta.sandbox.id, 'ro-offline');
    assert.equal(
      HINT_NAMES.every((h) => meta.hints[h].enforced),
      true,
    );
    const write = metaOf(out.get('write_file'));
    assert.equal(write.sandbox.id, 'rw-offline');
    assert.equal(hintsOf(out.get('write_file')).readOnlyHint, false);
    assert.equal(write.hints.idempotentHint.enforced, false, 'write_file claims idempotence: never enforced');
    assert.equal(hintsOf(out.get('write_file')).idempotentHint, true, 'and passed on as given');
    // create_directory says it only adds: a read-write mount cannot hold it to that.
    const mkdir = out.get('create_directory');
    assert.equal(hintsOf(mkdir).destructiveHint, true);
    assert.match(metaOf(mkdir).hints.destructiveHint.reason ?? '', /cannot be limited to adding files \(\/data\)/);
  });

  it('falls back to readOnlyHint: false (and destructive) for a read-only claim in a sandbox shared with a writer', () => {
    const tools = [tool('peek', { ...READ, destructiveHint: false, title: 'Peek' }), tool('put', WRITE)];
    const out = advertise(tools, ceiling({ split: false }));
    const peek = out.get('peek');
    assert.deepEqual(hintsOf(peek), {
      readOnlyHint: false,
      // Not read-only after all, and its sandbox can overwrite: "only adds" does not hold either.
      destructiveHint: true,
      idempotentHint: false,
      openWorldHint: false,
    });
    assert.equal(peek?.annotations?.title, 'Peek', 'other annotation keys pass as sent');
    const { readOnlyHint, destructiveHint } = metaOf(peek).hints;
    assert.deepEqual(readOnlyHint, {
      claimed: true,
      effective: true,
      holds: false,
      enforced: false,
      reason: 'sandbox can write /data',
    });
    assert.equal(destructiveHint.enforced, false);
    assert.match(destructiveHint.reason ?? '', /read-write mount/);
  });

  it('says openWorldHint: false where the sandbox has no network, even when the server claimed true', () => {
    const out = advertise([tool('fetch', { readOnlyHint: true, openWorldHint: true }), tool('bare')], ceiling());
    for (const name of ['fetch', 'bare']) {
      assert.equal(hintsOf(out.get(name)).openWorldHint, false, name);
      const { openWorldHint } = metaOf(out.get(name)).hints;
      assert.deepEqual([openWorldHint.effective, openWorldHint.holds, openWorldHint.enforced], [true, false, true]);
      assert.equal(metaOf(out.get(name)).sandbox.network, 'none');
    }
    assert.equal(hintsOf(out.get('bare')).readOnlyHint, false, 'a tool that says nothing is never raised to read-only');
    assert.equal(hintsOf(out.get('bare')).destructiveHint, true);
  });

  it('says openWorldHint: true for a closed-world claim in a sandbox that has a network', () => {
    const tools = [tool('local', READ), tool('fetch', { readOnlyHint: true, openWorldHint: true })];
    const out = advertise(tools, ceiling({ network: 'open', split: false }));
    assert.equal(hintsOf(out.get('local')).openWorldHint, true);
    assert.match(metaOf(out.get('local')).hints.openWorldHint.reason ?? '', /sandbox has network \(bridge\)/);
    // Read-only mounts, but a network: a tool there can change what it reaches outside.
    for (const name of ['local', 'fetch']) {
      assert.equal(hintsOf(out.get(name)).readOnlyHint, false, name);
      assert.match(metaOf(out.get(name)).hints.readOnlyHint.reason ?? '', /sandbox has a network \(bridge\)/, name);
      assert.equal(hintsOf(out.get(name)).destructiveHint, true, name);
    }
  });

  it("falls back for a read-only claim whose sandbox's database role can write", () => {
    const tools = [tool('query', READ), tool('drop', WRITE)];
    const out = advertise(tools, ceiling({ mounts: [], split: false, database: 'write' }));
    assert.equal(hintsOf(out.get('query')).readOnlyHint, false);
    assert.match(metaOf(out.get('query')).hints.readOnlyHint.reason ?? '', /database role has write privilege/);
    assert.equal(metaOf(out.get('query')).sandbox.database, 'write');
    const split = advertise(tools, ceiling({ mounts: [], database: 'write' }));
    assert.equal(hintsOf(split.get('query')).readOnlyHint, true, 'split: its own read role');
    assert.equal(metaOf(split.get('query')).sandbox.database, 'read');
  });

  it("takes the operator's overrides as the effective hints, and says they applied", () => {
    const out = advertise([tool('fetch', READ)], ceiling({ overrides: { fetch: { readOnlyHint: false } } }));
    const meta = metaOf(out.get('fetch'));
    assert.equal(meta.overridden, true);
    assert.deepEqual([meta.hints.readOnlyHint.claimed, meta.hints.readOnlyHint.effective], [true, false]);
    assert.equal(hintsOf(out.get('fetch')).readOnlyHint, false);
  });

  // proves: ADVERTISED-HINTS
  it('never promises more than the grant allows, for every claim on every ceiling', () => {
    const failures: string[] = [];
    const claims: ClaimedHints[] = [{}];
    for (let bits = 0; bits < 16; bits++) {
      claims.push(Object.fromEntries(HINT_NAMES.map((h, i) => [h, (bits & (1 << i)) !== 0])));
    }
    const tools = claims.map((c, i) => tool(`t${i}`, c));
    for (const network of ['none', 'open'] as const)
      for (const split of [true, false])
        for (const mode of ['ro', 'rw'] as const)
          for (const database of [undefined, ...DATABASE_PRIVILEGES] as (DatabasePrivilege | undefined)[]) {
            const at = ceiling({
              network,
              split,
              mounts: [{ source: '/srv', target: '/data', mode }],
              ...(database ? { database } : {}),
            });
            const plan = planSandboxes(tools, at);
            for (const [name, listed] of advertiseWith(tools, plan, 'enforced')) {
              const h = hintsOf(listed);
              const { sandbox, hints } = metaOf(listed);
              const writable = sandbox.mounts.some((m) => !m.readOnly);
              const label = `${name} ${network} split=${split} ${mode} db=${database}`;
              const networked = sandbox.network !== 'none';
              if (h.readOnlyHint && (writable || networked || (sandbox.database ?? 'read') !== 'read'))
                failures.push(`${label}: ro`);
              if (!h.readOnlyHint && !h.destructiveHint && (writable || networked || sandbox.database === 'write')) {
                failures.push(`${label}: only adds`);
              }
              if (h.openWorldHint !== (sandbox.network !== 'none')) failures.push(`${label}: open world`);
              for (const hint of HINT_NAMES) {
                if (hints[hint].enforced !== (hints[hint].reason === null)) failures.push(`${label}: ${hint} reason`);
              }
            }
          }
    assert.deepEqual(failures.slice(0, 5), [], `${failures.length} failures`);
  });
});

describe('advertised definitions: the rest of the contract', () => {
  it('passes the annotations as the server sent them with annotations: claimed, and still adds the account', () => {
    const tools = [tool('peek', { ...READ, title: 'Peek' }), tool('put', WRITE), tool('bare')];
    const out = advertise(tools, ceiling({ split: false }), 'claimed');
    assert.deepEqual(out.get('peek')?.annotations, { ...READ, title: 'Peek' });
    assert.equal(Object.hasOwn(out.get('bare')!, 'annotations'), false, 'absent stays absent');
    const meta = metaOf(out.get('peek'));
    assert.equal(meta.annotations, 'claimed');
    assert.equal(meta.hints.readOnlyHint.holds, false, 'the account still says what holds');
  });

  it("keeps the server's _meta, replaces a key of hintbox's it made up, and never changes its definition", () => {
    const theirs = { 'com.example/tags': ['x'], [ENFORCED_META_KEY]: { version: 1, forged: true } };
    const sent = Object.freeze(tool('peek', Object.freeze({ ...READ }), { _meta: Object.freeze({ ...theirs }) }));
    const copy = structuredClone(sent);
    const listed = advertise([sent], ceiling()).get('peek');
    assert.deepEqual(sent, copy, "the server's definition is unchanged");
    assert.notEqual(listed, sent);
    assert.deepEqual(listed?._meta?.['com.example/tags'], ['x']);
    assert.equal((metaOf(listed) as unknown as { forged?: boolean }).forged, undefined);
    assert.equal(metaOf(listed).version, 1);
  });

  it('has a stable shape: every key present, no host path', () => {
    const listed = advertise([tool('peek', READ)], ceiling()).get('peek');
    const meta = metaOf(listed);
    assert.deepEqual(Object.keys(meta), ['version', 'annotations', 'sandbox', 'overridden', 'hints']);
    assert.deepEqual(meta.sandbox, {
      id: 'ro-offline',
      mounts: [{ target: '/data', readOnly: true }],
      network: 'none',
      database: null,
    });
    assert.deepEqual(Object.keys(meta.hints), [...HINT_NAMES]);
    for (const hint of HINT_NAMES) {
      assert.deepEqual(Object.keys(meta.hints[hint]), ['claimed', 'effective', 'holds', 'enforced', 'reason']);
    }
    assert.doesNotMatch(JSON.stringify(listed), /secret-project|\/home\/operator/);
  });

  it('gives a cold start (from the lock file) the same advertised definitions, by pin, as the verified server', () => {
    const tools = [
      tool('peek', { readOnlyHint: true, title: 'Peek' }, { _meta: { 'com.example/x': 1 } }),
      tool('bare'),
      tool('put', { destructiveHint: false, openWorldHint: true }),
      ...filesystem.tools,
    ];
    for (const split of [true, false]) {
      const at = ceiling({ split, network: 'open' });
      let lock = emptyLock('files');
      for (const t of tools) lock = lockTool(lock, pinTool(t));
      const locked = lockedDefinitions(lock) as unknown as Listed[];
      for (const mode of ['enforced', 'claimed'] as const) {
        const pins = (defs: Listed[]) =>
          [...advertiseWith(defs, planSandboxes(defs, at), mode)].map(([n, d]) => `${n}:${pinTool(d).hash}`).sort();
        assert.deepEqual(pins(locked), pins(tools), `split=${split} ${mode}`);
      }
    }
  });

  it('advertises with the sandbox given, and refuses a tool whose sandbox the plan lacks', () => {
    const plan = planSandboxes([tool('peek', READ)], ceiling());
    const planned = plan.tools[0]!;
    const sandbox = {
      id: 'rw-offline',
      network: 'none' as const,
      mounts: [{ source: '/s', target: '/data', readOnly: false }],
    };
    const listed = advertisedDefinition(tool('peek', READ), planned, sandbox, 'enforced');
    assert.equal(metaOf(listed).sandbox.id, 'rw-offline');
    assert.throws(() => advertiser({ sandboxes: [] }, 'enforced')(tool('peek', READ), planned), /lacks/);
  });
});
