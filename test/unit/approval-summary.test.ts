import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { approvalSummary } from '../../src/cli/approval-summary.js';
import { planSandboxes, type Ceiling } from '../../src/policy/plan-sandboxes.js';

const ceiling: Ceiling = {
  mounts: [{ source: '/srv/w', target: '/workspace', mode: 'rw' }],
  network: 'none',
  split: true,
  overrides: {},
};
const plan = planSandboxes(
  [
    { name: 'read_file', annotations: { readOnlyHint: true } },
    {
      name: 'create_directory',
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    { name: 'bare' },
  ],
  ceiling,
);

describe('approvalSummary', () => {
  it("says what a tool claims, marks hintbox's defaults as such, where it runs and what is not enforced", () => {
    const read = approvalSummary(plan, 'read_file');
    assert.equal(read[0], 'claims: readOnlyHint=true');
    assert.equal(
      read[1],
      "hintbox's defaults for what it did not claim (written in the lock as such): destructiveHint=true, idempotentHint=false, openWorldHint=true",
    );
    assert.match(read[2]!, /^runs in: sandbox \S+ \(\/workspace read-only; network none\)$/);
    assert.match(read[3]!, /^enforced: /);
    const create = approvalSummary(plan, 'create_directory');
    assert.equal(create.length, 4 - 1, 'nothing filled in: no defaults line');
    assert.match(create[2]!, /^NOT enforced: destructiveHint \(/);
    assert.equal(approvalSummary(plan, 'bare')[0], 'claims: no hints at all (the worst case is assumed)');
    assert.deepEqual(approvalSummary(plan, 'unknown'), []);
  });
});
