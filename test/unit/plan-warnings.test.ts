import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { planWarnings } from '../../src/cli/plan-warnings.js';
import { planSandboxes, type Ceiling } from '../../src/policy/plan-sandboxes.js';

const offline: Ceiling = {
  mounts: [{ source: '/srv/projects', target: '/projects', mode: 'rw' }],
  network: 'none',
  split: true,
  overrides: {},
};
const tools = [
  { name: 'fetch', annotations: { readOnlyHint: true, openWorldHint: true } },
  { name: 'read', annotations: { readOnlyHint: true, openWorldHint: false } },
  { name: 'unannotated' },
];

describe('planWarnings', () => {
  // proves: PLAN-SAYS-WHY
  it('warns when an open-world tool will have no network, and says why each advertised hint differs from the claim', () => {
    const lines = planWarnings(planSandboxes(tools, offline));
    const warnings = lines.filter((l) => l.startsWith('warning: '));
    assert.equal(warnings.length, 1, 'only the tool that says it is open-world, not the unannotated one');
    assert.match(
      warnings[0]!,
      /^warning: fetch says it talks to the outside world \(openWorldHint\), but its sandbox \S+ has no network/,
    );
    assert.match(warnings[0]!, /network: \{ allow: \[host:port, …\] \}/);
    assert.ok(
      lines.includes(
        'advertised: fetch: openWorldHint claimed true, advertised false (its sandbox has no network: nothing in it reaches the outside)',
      ),
      lines.join('\n'),
    );
    assert.equal(lines.filter((l) => l.startsWith('advertised: read')).length, 0, 'read is advertised as claimed');
    assert.deepEqual(
      planWarnings(planSandboxes(tools, offline), 'claimed').length,
      1,
      'claims passed on: only the warning',
    );
  });

  it('warns of nothing for an open-world tool that has a network', () => {
    const lines = planWarnings(planSandboxes(tools.slice(0, 1), { ...offline, network: 'open' }));
    assert.equal(lines.filter((l) => l.startsWith('warning: ')).length, 0);
    assert.match(
      lines.join('\n'),
      /advertised: fetch: readOnlyHint claimed true, advertised false \(sandbox has a network/,
    );
  });
});
