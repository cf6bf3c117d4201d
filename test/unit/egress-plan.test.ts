import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { HINT_NAMES, type ToolHints } from '../../src/policy/hints.js';
import {
  grantFor,
  planSandboxes,
  sandboxId,
  unenforcedHints,
  unionGrant,
  type Ceiling,
  type CeilingHosts,
  type SandboxPlan,
} from '../../src/policy/plan-sandboxes.js';

const HOSTS: CeilingHosts = {
  allow: ['api.example.com:443', '*.example.com:443', '198.51.100.7:80'],
  backend: ['db.internal:5432'],
};

function ceiling(partial: Partial<Ceiling> = {}): Ceiling {
  return {
    mounts: [{ source: '/srv/projects', target: '/projects', mode: 'rw' }],
    network: HOSTS,
    split: true,
    overrides: {},
    ...partial,
  };
}

const OPEN_READ = { name: 'search', annotations: { readOnlyHint: true, openWorldHint: true } };
const CLOSED_READ = { name: 'query', annotations: { readOnlyHint: true, openWorldHint: false } };

function toolOf(plan: SandboxPlan, name: string) {
  const tool = plan.tools.find((t) => t.name === name);
  assert.ok(tool, `tool ${name} is in the plan`);
  return tool;
}

function sandboxOf(plan: SandboxPlan, name: string) {
  const id = toolOf(plan, name).sandbox;
  const sandbox = plan.sandboxes.find((s) => s.id === id);
  assert.ok(sandbox, `sandbox ${id} is in the plan`);
  return sandbox;
}

describe('planSandboxes with network by host name', () => {
  it('an open-world read-only tool gets ro-egress: allow and backend, sorted, scope allow', () => {
    const plan = planSandboxes([OPEN_READ], ceiling());
    const sandbox = sandboxOf(plan, 'search');
    assert.equal(sandbox.id, 'ro-egress');
    assert.equal(sandbox.network, 'egress');
    assert.deepEqual(sandbox.egress, {
      hosts: ['*.example.com:443', '198.51.100.7:80', 'api.example.com:443', 'db.internal:5432'],
      scope: 'allow',
    });
    assert.equal(toolOf(plan, 'search').network, 'egress');
    assert.equal(toolOf(plan, 'search').enforced, true);
  });

  it('a closed-world tool gets only the backend: a -backend sandbox, openWorldHint enforced', () => {
    const plan = planSandboxes([CLOSED_READ], ceiling());
    const sandbox = sandboxOf(plan, 'query');
    assert.equal(sandbox.id, 'ro-backend');
    assert.equal(sandbox.network, 'egress');
    assert.deepEqual(sandbox.egress, { hosts: ['db.internal:5432'], scope: 'backend' });
    assert.equal(toolOf(plan, 'query').enforced, true);
    assert.deepEqual(toolOf(plan, 'query').unenforced, []);
  });

  it('open- and closed-world tools split into two sandboxes', () => {
    const plan = planSandboxes([OPEN_READ, CLOSED_READ], ceiling());
    assert.deepEqual(plan.sandboxes.map((s) => s.id).sort(), ['ro-backend', 'ro-egress']);
  });

  it('duplicates between allow and backend appear once', () => {
    const network = { allow: ['db.internal:5432', 'b.example.com:443'], backend: ['db.internal:5432'] };
    const grant = grantFor(
      { readOnlyHint: true, destructiveHint: false, idempotentHint: false, openWorldHint: true },
      ceiling({ network }),
    );
    assert.deepEqual(grant.egress?.hosts, ['b.example.com:443', 'db.internal:5432']);
  });

  it('a closed-world tool with an empty backend gets no network (-offline)', () => {
    const plan = planSandboxes([CLOSED_READ, OPEN_READ], ceiling({ network: { allow: HOSTS.allow, backend: [] } }));
    const sandbox = sandboxOf(plan, 'query');
    assert.equal(sandbox.id, 'ro-offline');
    assert.equal(sandbox.network, 'none');
    assert.equal(sandbox.egress, undefined);
    assert.equal(plan.strictest.id, 'ro-offline');
    assert.equal(sandboxOf(plan, 'search').egress?.scope, 'allow');
  });

  it('an open-world tool with only a backend gets a -backend sandbox', () => {
    const plan = planSandboxes([OPEN_READ], ceiling({ network: { allow: [], backend: ['db.internal:5432'] } }));
    assert.equal(sandboxOf(plan, 'search').id, 'ro-backend');
  });

  it('network none and open are unchanged', () => {
    const none = planSandboxes([OPEN_READ, CLOSED_READ], ceiling({ network: 'none' }));
    for (const tool of ['search', 'query']) {
      assert.equal(sandboxOf(none, tool).id, 'ro-offline');
      assert.equal(sandboxOf(none, tool).egress, undefined);
    }
    const open = planSandboxes([OPEN_READ, CLOSED_READ], ceiling({ network: 'open' }));
    assert.equal(sandboxOf(open, 'search').id, 'ro-online');
    assert.equal(sandboxOf(open, 'search').network, 'bridge');
    assert.equal(sandboxOf(open, 'search').egress, undefined);
    assert.equal(sandboxOf(open, 'query').id, 'ro-offline');
  });

  it('split: false gives the union of the hosts; a closed-world tool there is unenforced openWorldHint', () => {
    const plan = planSandboxes([OPEN_READ, CLOSED_READ], ceiling({ split: false }));
    assert.equal(plan.sandboxes.length, 1);
    const sandbox = plan.sandboxes[0]!;
    assert.equal(sandbox.id, 'ro-egress');
    assert.deepEqual(sandbox.egress, {
      hosts: ['*.example.com:443', '198.51.100.7:80', 'api.example.com:443', 'db.internal:5432'],
      scope: 'allow',
    });
    const query = toolOf(plan, 'query');
    assert.equal(query.enforced, false);
    assert.deepEqual(
      query.unenforced.map((u) => u.hint),
      ['openWorldHint'],
    );
    assert.match(query.unenforced[0]!.reason, /network\.allow/);
    assert.equal(toolOf(plan, 'search').enforced, true);
  });

  it('split: false with only closed-world tools keeps the backend scope and openWorldHint enforced', () => {
    const other = { name: 'lookup', annotations: { readOnlyHint: true, openWorldHint: false } };
    const plan = planSandboxes([CLOSED_READ, other], ceiling({ split: false }));
    assert.equal(plan.sandboxes.length, 1);
    assert.equal(plan.sandboxes[0]!.id, 'ro-backend');
    assert.deepEqual(plan.sandboxes[0]!.egress, { hosts: ['db.internal:5432'], scope: 'backend' });
    for (const tool of plan.tools) assert.equal(tool.enforced, true, tool.name);
  });

  it('unionGrant merges the hosts of egress grants; no hosts: no network', () => {
    const c = ceiling();
    const a = {
      network: 'egress' as const,
      egress: { hosts: ['db.internal:5432'], scope: 'backend' as const },
      mounts: [],
    };
    const b = {
      network: 'egress' as const,
      egress: { hosts: ['api.example.com:443', 'db.internal:5432'], scope: 'allow' as const },
      mounts: [],
    };
    assert.deepEqual(unionGrant([a, b], c).egress, {
      hosts: ['api.example.com:443', 'db.internal:5432'],
      scope: 'allow',
    });
    assert.deepEqual(unionGrant([a], c).egress, { hosts: ['db.internal:5432'], scope: 'backend' });
    const offline = unionGrant([{ network: 'none', mounts: [] }], c);
    assert.equal(offline.network, 'none');
    assert.equal(offline.egress, undefined);
  });

  it('sandboxId names egress classes by scope', () => {
    const mounts = [{ source: '/a', target: '/a', readOnly: false }];
    assert.equal(
      sandboxId({ network: 'egress', egress: { hosts: ['x.test:1'], scope: 'allow' }, mounts }),
      'rw-egress',
    );
    assert.equal(
      sandboxId({ network: 'egress', egress: { hosts: ['x.test:1'], scope: 'backend' }, mounts }),
      'rw-backend',
    );
  });

  it('unenforcedHints: a backend-only grant keeps openWorldHint, an allow grant does not', () => {
    const closed: ToolHints = {
      readOnlyHint: true,
      destructiveHint: false,
      idempotentHint: false,
      openWorldHint: false,
    };
    const backend = unenforcedHints(closed, {
      network: 'egress',
      egress: { hosts: ['db.internal:5432'], scope: 'backend' },
      mounts: [],
    });
    assert.deepEqual(backend, []);
    const allow = unenforcedHints(closed, {
      network: 'egress',
      egress: { hosts: ['api.example.com:443'], scope: 'allow' },
      mounts: [],
    });
    assert.deepEqual(
      allow.map((u) => u.hint),
      ['openWorldHint'],
    );
  });

  it('hints only narrow the ceiling: no grant has hosts outside allow ∪ backend', () => {
    const ceilings: CeilingHosts[] = [
      HOSTS,
      { allow: [], backend: ['db.internal:5432'] },
      { allow: ['api.example.com:443'], backend: [] },
      { allow: ['db.internal:5432'], backend: ['db.internal:5432'] },
    ];
    const combos: ToolHints[] = [];
    for (let bits = 0; bits < 1 << HINT_NAMES.length; bits++) {
      combos.push(
        Object.fromEntries(HINT_NAMES.map((name, i) => [name, (bits & (1 << i)) !== 0])) as unknown as ToolHints,
      );
    }
    assert.equal(combos.length, 16);
    let checked = 0;
    for (const network of ceilings) {
      const permitted = new Set([...network.allow, ...network.backend]);
      for (const split of [true, false]) {
        const c = ceiling({ network, split });
        for (const hints of combos) {
          const grant = grantFor(hints, c);
          assert.notEqual(grant.network, 'bridge');
          for (const host of grant.egress?.hosts ?? []) assert.ok(permitted.has(host), host);
          if (!hints.openWorldHint) {
            for (const host of grant.egress?.hosts ?? []) assert.ok(network.backend.includes(host), host);
            assert.deepEqual(
              unenforcedHints(hints, grant).filter((u) => u.hint === 'openWorldHint'),
              [],
            );
          }
          checked++;
        }
        const tools = combos.map((hints, i) => ({ name: `t${i}`, annotations: hints }));
        const plan = planSandboxes(tools, c);
        for (const sandbox of plan.sandboxes) {
          assert.notEqual(sandbox.network, 'bridge');
          for (const host of sandbox.egress?.hosts ?? []) assert.ok(permitted.has(host), `${sandbox.id}: ${host}`);
          if (sandbox.egress) assert.equal(sandbox.network, 'egress');
          if (sandbox.network === 'egress') assert.ok((sandbox.egress?.hosts.length ?? 0) > 0);
        }
      }
    }
    assert.equal(checked, ceilings.length * 2 * 16);
  });
});
