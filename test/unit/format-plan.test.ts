import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  formatPlanTable,
  formatSensitiveMounts,
  hintCode,
  planToJson,
  sensitiveMounts,
} from '../../src/cli/format-plan.js';
import { planSandboxes, type Ceiling } from '../../src/policy/plan-sandboxes.js';

const ceiling: Ceiling = {
  mounts: [
    { source: '/srv/projects', target: '/projects', mode: 'rw' },
    { source: '/srv/ref', target: '/ref', mode: 'ro' },
  ],
  network: 'open',
  split: true,
  overrides: { fetch: { openWorldHint: true } },
};
const plan = planSandboxes(
  [
    { name: 'read', annotations: { readOnlyHint: true, openWorldHint: false } },
    { name: 'mkdir', annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: false } },
    { name: 'fetch', annotations: { readOnlyHint: true, openWorldHint: false } },
  ],
  ceiling,
);

interface JsonPlan {
  server: string;
  tools: Array<{
    name: string;
    claimed: Record<string, boolean>;
    effective: Record<string, boolean>;
    advertised: Record<string, boolean>;
    overridden: boolean;
    sandbox: string;
    enforced: boolean;
    unenforced: Array<{ hint: string; reason: string }>;
  }>;
  sandboxes: Array<{
    id: string;
    tools: string[];
    network: string;
    mounts: Array<{ source: string; target: string; readOnly: boolean }>;
    runs: string;
  }>;
  rejected: Array<{ index: number; name?: string; reason: string }>;
}

describe('planToJson', () => {
  const json = JSON.parse(
    JSON.stringify(planToJson('files', plan, [{ index: 3, name: 'bad', reason: 'inputSchema: Required' }])),
  ) as JsonPlan;

  it('lists each tool with claimed and effective hints, sandbox and enforcement', () => {
    assert.equal(json.server, 'files');
    assert.deepEqual(
      json.tools.map((t) => t.name),
      ['read', 'mkdir', 'fetch'],
    );
    const [read, mkdir, fetch] = json.tools;
    assert.deepEqual(read!.claimed, { readOnlyHint: true, openWorldHint: false });
    assert.deepEqual(read!.effective, {
      readOnlyHint: true,
      destructiveHint: true,
      idempotentHint: false,
      openWorldHint: false,
    });
    assert.equal(read!.enforced, true);
    assert.equal(read!.overridden, false);
    assert.deepEqual(read!.unenforced, []);

    assert.equal(mkdir!.enforced, false);
    assert.deepEqual(
      mkdir!.unenforced.map((u) => u.hint),
      ['destructiveHint'],
    );
    assert.equal(typeof mkdir!.unenforced[0]!.reason, 'string');

    assert.deepEqual(
      mkdir!.advertised,
      { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
      'clients are told what holds: a read-write mount may overwrite',
    );
    assert.deepEqual(
      (planToJson('files', plan, [], true, 'claimed') as JsonPlan).tools[1]!.advertised,
      mkdir!.claimed,
      'or, with annotations: claimed, the claims',
    );

    assert.equal(fetch!.overridden, true);
    assert.equal(fetch!.effective.openWorldHint, true);
    assert.equal(fetch!.claimed.openWorldHint, false);

    for (const t of json.tools) {
      assert.deepEqual(Object.keys(t).sort(), [
        'advertised',
        'claimed',
        'effective',
        'enforced',
        'name',
        'overridden',
        'sandbox',
        'unenforced',
      ]);
      assert.ok(
        json.sandboxes.some((s) => s.id === t.sandbox && s.tools.includes(t.name)),
        'json.sandboxes.some((s) => s.id === t.sandbox && s.tools.includes(t.name))',
      );
    }
    assert.notEqual(read!.sandbox, mkdir!.sandbox);
    assert.notEqual(read!.sandbox, fetch!.sandbox);
  });

  it('lists each sandbox with its tools, network and mounts', () => {
    assert.equal(json.sandboxes.length, 3);
    for (const s of json.sandboxes) {
      assert.deepEqual(Object.keys(s).sort(), ['id', 'mounts', 'network', 'runs', 'tools']);
      for (const m of s.mounts) assert.deepEqual(Object.keys(m).sort(), ['readOnly', 'source', 'target']);
    }
    const byTool = (name: string) => json.sandboxes.find((s) => s.tools.includes(name))!;
    assert.deepEqual(byTool('read'), {
      id: byTool('read').id,
      tools: ['read'],
      network: 'none',
      runs: 'free',
      mounts: [
        { source: '/srv/projects', target: '/projects', readOnly: true },
        { source: '/srv/ref', target: '/ref', readOnly: true },
      ],
    });
    assert.equal(byTool('mkdir').network, 'none');
    assert.deepEqual(
      byTool('mkdir').mounts.map((m) => m.readOnly),
      [false, true],
    );
    assert.equal(byTool('fetch').network, 'bridge');
    assert.deepEqual(
      byTool('fetch').mounts.map((m) => m.readOnly),
      [true, true],
    );
    assert.equal(byTool('mkdir').runs, 'during-calls', 'a writable mount');
    assert.equal(byTool('fetch').runs, 'during-calls', 'a network');
  });

  it('carries the rejected tools, and none by default', () => {
    assert.deepEqual(json.rejected, [{ index: 3, name: 'bad', reason: 'inputSchema: Required' }]);
    assert.deepEqual((planToJson('files', plan) as JsonPlan).rejected, []);
  });

  it('does not include the internal strictest sandbox as a planned one', () => {
    assert.ok(!('strictest' in json), "!('strictest' in json)");
  });
});

describe('hintCode', () => {
  it('codes each hint, with - for missing', () => {
    assert.equal(hintCode({}), '----');
    assert.equal(
      hintCode({ readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false }),
      'RaIc',
    );
    assert.equal(
      hintCode({ readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true }),
      'wDiO',
    );
    assert.equal(hintCode({ openWorldHint: false }), '---c');
  });

  it('marks destructive and idempotent as moot (.) for an effective read-only tool', () => {
    const ro = { readOnlyHint: true, destructiveHint: true, idempotentHint: false, openWorldHint: false };
    assert.equal(hintCode(ro, true), 'R..c');
    assert.equal(hintCode(ro), 'RDic', 'claims are shown as claimed');
    assert.equal(
      hintCode({ readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: true }, true),
      'waIO',
    );
  });
});

describe('formatPlanTable', () => {
  it('shows every tool and sandbox, and says plainly what is not enforced', () => {
    const text = formatPlanTable('files', plan, [{ index: 3, name: 'bad', reason: 'broken' }]);
    assert.match(text, /^server files: 3 tool\(s\) in 3 sandbox\(es\)/);
    const rows = text.split('\n');
    const row = (name: string) => rows.find((l) => l.startsWith(`${name} `))!;
    assert.match(row('read'), /\byes$/);
    assert.match(row('mkdir'), /NO: destructiveHint/);
    assert.match(
      row('fetch'),
      / R--c +R\.\.O\* +wDiO /,
      'claimed hints, then effective hints (moot ones as .) with override marker, then advertised ones (a networked tool is never advertised read-only)',
    );
    assert.match(row('mkdir'), / wa-c +waic +wDic /, 'advertised: only-adds does not hold on a read-write mount');
    assert.match(row('fetch'), /\bbridge\b/);
    assert.match(text, /left out: tool #3 \(bad\): broken/);
    for (const s of plan.sandboxes)
      assert.ok(
        text.includes(`sandbox ${s.id}: network ${s.network}`),
        'text.includes(`sandbox ${s.id}: network ${s.network}`)',
      );
  });

  it('says which sandboxes run only during calls allowed into them, and which run freely', () => {
    const lines = (hold: boolean) =>
      formatPlanTable('files', plan, [], hold)
        .split('\n')
        .filter((l) => l.startsWith('sandbox '));
    for (const line of lines(true)) {
      const free = /network none; [^;]*\(read-only\)[^;]*; runs freely/.test(line);
      assert.ok(free || line.includes('runs only during calls allowed into it'), line);
    }
    assert.ok(
      lines(true).some((l) => l.includes('runs freely')),
      'the read-only, offline one runs freely',
    );
    assert.ok(
      lines(false).every((l) => l.includes('runs freely')),
      'hold: false',
    );
    assert.deepEqual((planToJson('files', plan) as JsonPlan).sandboxes.map((s) => s.runs).sort(), [
      'during-calls',
      'during-calls',
      'free',
    ]);
  });
});

describe('plan: mounts with a sensitive opt-in', () => {
  it('names each mount that may hold a sensitive place, and what each name stands for; others are not listed', () => {
    const mounts = [
      { source: '/home/a/.bashrc', target: '/data/rc', mode: 'ro' as const, allowSensitive: ['.bashrc'] },
      { source: '/srv/data', target: '/data/d', mode: 'rw' as const },
    ];
    assert.deepEqual(formatSensitiveMounts(mounts), [
      'sensitive: mounts[0] /home/a/.bashrc -> /data/rc holds, as the profile allows: .bashrc (a shell start-up file)',
    ]);
    assert.deepEqual(sensitiveMounts(mounts), [
      { mount: 0, source: '/home/a/.bashrc', target: '/data/rc', allowed: ['.bashrc'] },
    ]);
  });
});
