import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  decideApproval,
  APPROVAL_WARNING_TEXT,
  type ApprovalAction,
  type ApprovalDecision,
  type ApprovalInput,
  type OperatorRule,
  type PinState,
  type ServerTrust,
} from '../../src/policy/approval-decision.js';
import { HINT_NAMES, type ToolHints } from '../../src/policy/hints.js';

const TRUSTS: ServerTrust[] = ['trusted', 'untrusted'];
const PINS: PinState[] = ['approved', 'changed', 'unpinned'];
const RULES: (OperatorRule | undefined)[] = [undefined, 'confirm', 'deny', 'allow'];

/** All 16 hint sets. */
function allHints(): ToolHints[] {
  const out: ToolHints[] = [];
  for (let bits = 0; bits < 16; bits++) {
    const hints = {} as ToolHints;
    HINT_NAMES.forEach((name, i) => (hints[name] = (bits & (1 << i)) !== 0));
    out.push(hints);
  }
  return out;
}

/** Every input: 16 hints × missing × trust × pin × enforced × network × rule × pre-approval = 6144. */
function allInputs(): ApprovalInput[] {
  const out: ApprovalInput[] = [];
  for (const hints of allHints())
    for (const annotationsMissing of [false, true])
      for (const trust of TRUSTS)
        for (const pin of PINS)
          for (const enforced of [false, true])
            for (const networked of [false, true])
              for (const rule of RULES)
                for (const preApproved of [false, true])
                  out.push(
                    Object.freeze({
                      hints: Object.freeze(hints),
                      annotationsMissing,
                      trust,
                      pin,
                      enforced,
                      networked,
                      rule,
                      preApproved,
                    }),
                  );
  return out;
}

const INPUTS = allInputs();

/** More friction is a higher number; deny and blocked both refuse. */
const FRICTION: Record<ApprovalAction, number> = { run: 0, confirm: 1, deny: 2, blocked: 2 };

function label(input: ApprovalInput): string {
  const h = HINT_NAMES.filter((n) => input.hints[n]).join('+') || 'no hints true';
  return `${h}${input.annotationsMissing ? ' (missing)' : ''} ${input.trust} pin=${input.pin} enforced=${input.enforced} net=${input.networked} rule=${input.rule ?? '-'} pre=${input.preApproved}`;
}

/** Checks `check` on every input; reports the first few failures with their inputs. */
function forAll(check: (input: ApprovalInput, decision: ApprovalDecision) => string | undefined): void {
  const failures: string[] = [];
  for (const input of INPUTS) {
    const problem = check(input, decideApproval(input));
    if (problem !== undefined) failures.push(`${label(input)}: ${problem}`);
  }
  assert.deepEqual(failures.slice(0, 5), [], `${failures.length} of ${INPUTS.length} combinations fail`);
}

function mayRun(input: ApprovalInput): boolean {
  return input.trust === 'trusted' && input.pin === 'approved' && input.rule !== 'confirm' && input.rule !== 'deny';
}

describe('decideApproval over every combination', () => {
  it('covers 6144 distinct combinations', () => {
    assert.equal(INPUTS.length, 16 * 2 * 2 * 3 * 2 * 2 * 4 * 2);
    assert.equal(new Set(INPUTS.map(label)).size, INPUTS.length, 'labels are distinct');
  });

  // proves: APPROVAL-UNTRUSTED
  it('never runs a call of an untrusted server', () => {
    forAll((i, d) => (i.trust === 'untrusted' && d.action === 'run' ? 'ran' : undefined));
  });

  it('confirms every call of an untrusted server whose pin is approved, unless a rule denies it', () => {
    forAll((i, d) => {
      if (i.trust !== 'untrusted' || i.pin !== 'approved') return undefined;
      const expected = i.rule === 'deny' ? 'deny' : 'confirm';
      return d.action === expected ? undefined : `got ${d.action}, expected ${expected}`;
    });
  });

  // proves: PINS
  it('blocks every tool whose definition changed, whatever the trust and the rules', () => {
    forAll((i, d) =>
      i.pin === 'changed' && (d.action !== 'blocked' || d.decidedBy !== 'pin') ? `got ${d.action}` : undefined,
    );
  });

  it("blocks an untrusted server's unpinned tool; confirms a trusted server's unless denied", () => {
    forAll((i, d) => {
      if (i.pin !== 'unpinned') return undefined;
      const expected = i.trust === 'untrusted' ? 'blocked' : i.rule === 'deny' ? 'deny' : 'confirm';
      return d.action === expected ? undefined : `got ${d.action}, expected ${expected}`;
    });
  });

  // proves: APPROVAL-UNTRUSTED
  it('never lets a rule or a pre-approval remove friction for an untrusted server', () => {
    forAll((i, d) => {
      if (i.trust !== 'untrusted' || !(i.rule === 'allow' || i.preApproved)) return undefined;
      const plain = decideApproval({ ...i, rule: undefined, preApproved: false });
      return FRICTION[d.action] < FRICTION[plain.action] ? `${plain.action} → ${d.action}` : undefined;
    });
  });

  it('ignores allow and pre-approval entirely for an untrusted server (same decision as without)', () => {
    forAll((i, d) => {
      if (i.trust !== 'untrusted' || i.rule === 'confirm' || i.rule === 'deny') return undefined;
      const plain = decideApproval({ ...i, rule: undefined, preApproved: false });
      return JSON.stringify(d) === JSON.stringify(plain) ? undefined : 'differs';
    });
  });

  it('lets confirm and deny rules only add friction, for any server', () => {
    forAll((i, d) => {
      if (i.rule !== 'confirm' && i.rule !== 'deny') return undefined;
      const plain = decideApproval({ ...i, rule: undefined });
      if (FRICTION[d.action] < FRICTION[plain.action]) return `${plain.action} → ${d.action}`;
      if (i.rule === 'confirm' && d.action === 'run') return 'ran despite confirm rule';
      if (i.rule === 'deny' && d.action !== 'deny' && d.action !== 'blocked') return `${d.action} despite deny rule`;
      return undefined;
    });
  });

  it('lets allow and pre-approval only remove friction, and only a confirmation', () => {
    forAll((i, d) => {
      if (!(i.rule === 'allow' || i.preApproved)) return undefined;
      const plain = decideApproval({ ...i, rule: i.rule === 'allow' ? undefined : i.rule, preApproved: false });
      if (FRICTION[d.action] > FRICTION[plain.action]) return `${plain.action} → ${d.action}`;
      if (plain.action !== d.action && !(plain.action === 'confirm' && d.action === 'run')) {
        return `${plain.action} → ${d.action}`;
      }
      return undefined;
    });
  });

  it('runs only a trusted, approved tool: read-only and enforced, or allowed / pre-approved by the operator', () => {
    forAll((i, d) => {
      if (d.action !== 'run') return undefined;
      if (!mayRun(i)) return 'ran without trust, approved pin and a rule that permits it';
      const autoRun = i.hints.readOnlyHint && i.enforced && !i.annotationsMissing;
      if (!autoRun && i.rule !== 'allow' && !i.preApproved) return 'ran a tool that needs confirmation';
      const expectedBy = autoRun ? 'auto' : i.rule === 'allow' ? 'rule' : 'pre-approval';
      return d.decidedBy === expectedBy ? undefined : `decidedBy ${d.decidedBy}, expected ${expectedBy}`;
    });
  });

  it('runs a trusted, approved, enforced read-only tool without asking (decided by the policy)', () => {
    forAll((i, d) => {
      if (!(mayRun(i) && i.hints.readOnlyHint && i.enforced && !i.annotationsMissing)) return undefined;
      return d.action === 'run' && d.decidedBy === 'auto' ? undefined : `got ${d.action} by ${d.decidedBy}`;
    });
  });

  it('confirms a mutation (not read-only) unless the operator allowed or pre-approved it', () => {
    forAll((i, d) => {
      if (i.hints.readOnlyHint && !i.annotationsMissing) return undefined;
      if (i.rule === 'allow' || i.preApproved || i.rule === 'deny' || i.pin !== 'approved') return undefined;
      return d.action === 'confirm' ? undefined : `got ${d.action}`;
    });
  });

  it('confirms a read-only tool whose sandbox does not enforce its hints', () => {
    forAll((i, d) => {
      if (!i.hints.readOnlyHint || i.enforced || i.rule === 'allow' || i.preApproved || i.rule === 'deny') {
        return undefined;
      }
      if (i.pin === 'changed' || (i.pin === 'unpinned' && i.trust === 'untrusted')) return undefined;
      return d.action === 'confirm' ? undefined : `got ${d.action}`;
    });
  });

  it('warns "irreversible" and shows full arguments for destructive tools and missing annotations', () => {
    forAll((i, d) => {
      const destructive = !i.hints.readOnlyHint && i.hints.destructiveHint;
      if (!(destructive || i.annotationsMissing)) return undefined;
      if (!d.warnings.includes('irreversible')) return 'no irreversible warning';
      return d.showFullArguments ? undefined : 'arguments may be truncated';
    });
  });

  it("treats an untrusted server's unenforced claims as the worst case", () => {
    forAll((i, d) => {
      if (i.trust !== 'untrusted' || i.enforced) return undefined;
      const all = ['irreversible', ...(i.networked ? ['data-may-leave'] : []), 'hints-not-enforced'];
      return JSON.stringify(d.warnings) === JSON.stringify(all) ? undefined : `warnings ${d.warnings.join(',')}`;
    });
  });

  it('omits "irreversible" only when a relied-on hint says read-only or only-adds', () => {
    forAll((i, d) => {
      if (d.warnings.includes('irreversible')) return undefined;
      if (i.annotationsMissing) return 'missing annotations without the warning';
      if (i.trust === 'untrusted' && !i.enforced) return 'unenforced untrusted claim removed the warning';
      return i.hints.readOnlyHint || !i.hints.destructiveHint ? undefined : 'destructive without the warning';
    });
  });

  it('shows full arguments exactly when the call may be irreversible', () => {
    forAll((i, d) => (d.showFullArguments === d.warnings.includes('irreversible') ? undefined : 'mismatch'));
  });

  it("warns that data may leave the machine exactly when the tool's sandbox has a network, whatever its hints", () => {
    forAll((i, d) => (d.warnings.includes('data-may-leave') === i.networked ? undefined : 'mismatch'));
  });

  it('warns about unenforced hints exactly when the sandbox does not enforce them', () => {
    forAll((i, d) => (d.warnings.includes('hints-not-enforced') === !i.enforced ? undefined : 'mismatch'));
  });

  it('retries on timeout only a trusted, annotated, idempotent, not read-only tool that may go ahead', () => {
    forAll((i, d) => {
      const expected =
        i.trust === 'trusted' &&
        !i.annotationsMissing &&
        i.hints.idempotentHint &&
        !i.hints.readOnlyHint &&
        (d.action === 'run' || d.action === 'confirm');
      return d.retryOnTimeout === expected ? undefined : `retryOnTimeout ${d.retryOnTimeout}`;
    });
  });

  it('never changes the action because of idempotentHint', () => {
    forAll((i, d) => {
      const flipped = decideApproval({ ...i, hints: { ...i.hints, idempotentHint: !i.hints.idempotentHint } });
      return flipped.action === d.action ? undefined : `${d.action} vs ${flipped.action}`;
    });
  });

  it('always gives reasons, known warning codes in a fixed order, and is deterministic', () => {
    const order = Object.keys(APPROVAL_WARNING_TEXT);
    forAll((i, d) => {
      if (d.reasons.length === 0 || d.reasons.some((r) => r.length === 0)) return 'empty reasons';
      const positions = d.warnings.map((w) => order.indexOf(w));
      if (positions.some((p, k) => p < 0 || (k > 0 && p <= positions[k - 1]!)))
        return `warnings ${d.warnings.join(',')}`;
      return JSON.stringify(decideApproval(i)) === JSON.stringify(d) ? undefined : 'not deterministic';
    });
  });

  it('credits a rule only when it changed what the policy would have done', () => {
    forAll((i, d) => {
      if (d.decidedBy !== 'rule') return undefined;
      const plain = decideApproval({ ...i, rule: undefined, preApproved: false });
      return plain.action === d.action ? `rule credited for unchanged ${d.action}` : undefined;
    });
  });
});

describe('decideApproval examples', () => {
  const base: ApprovalInput = {
    hints: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
    annotationsMissing: false,
    trust: 'trusted',
    pin: 'approved',
    enforced: true,
    networked: true,
  };

  it("runs the filesystem server's read_file (trusted, read-only, closed world, enforced) without warnings", () => {
    const d = decideApproval({
      ...base,
      hints: { readOnlyHint: true, destructiveHint: false, idempotentHint: false, openWorldHint: false },
      networked: false,
    });
    assert.deepEqual(
      { action: d.action, decidedBy: d.decidedBy, warnings: d.warnings, retry: d.retryOnTimeout },
      { action: 'run', decidedBy: 'auto', warnings: [], retry: false },
    );
  });

  it('confirms write_file (destructive, idempotent) with full arguments, and retries it on timeout', () => {
    const d = decideApproval({
      ...base,
      hints: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
      networked: false,
    });
    assert.equal(d.action, 'confirm');
    assert.equal(d.showFullArguments, true);
    assert.deepEqual(d.warnings, ['irreversible']);
    assert.equal(d.retryOnTimeout, true);
    assert.match(d.reasons[0]!, /destructive/);
  });

  it('confirms create_directory (only adds) without the irreversible warning', () => {
    const d = decideApproval({
      ...base,
      hints: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
      networked: false,
    });
    assert.equal(d.action, 'confirm');
    assert.deepEqual(d.warnings, []);
    assert.equal(d.showFullArguments, false);
  });

  it('says why when an untrusted read-only tool is confirmed', () => {
    const d = decideApproval({
      ...base,
      trust: 'untrusted',
      rule: 'allow',
      hints: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    });
    assert.equal(d.action, 'confirm');
    assert.equal(d.decidedBy, 'auto');
    assert.equal(d.retryOnTimeout, false);
    assert.ok(
      d.reasons.some((r) => r.includes('untrusted')),
      `a reason names the untrusted server: ${d.reasons.join('; ')}`,
    );
  });

  it('names the missing annotations and warns of data leaving for a tool without annotations', () => {
    const d = decideApproval({ ...base, annotationsMissing: true });
    assert.equal(d.action, 'confirm');
    assert.deepEqual(d.warnings, ['irreversible', 'data-may-leave']);
    assert.ok(
      d.reasons.some((r) => r.includes('no annotations')),
      `a reason names the missing annotations: ${d.reasons.join('; ')}`,
    );
  });

  it('does not say data may leave for a network-less sandbox, even without annotations or with an open-world claim', () => {
    for (const input of [
      { ...base, annotationsMissing: true, networked: false },
      { ...base, trust: 'untrusted' as const, enforced: false, networked: false },
      { ...base, networked: false },
    ]) {
      const d = decideApproval(input);
      assert.equal(d.warnings.includes('data-may-leave'), false, JSON.stringify(input));
      assert.equal(d.warnings.includes('irreversible'), true, 'the worst case is still assumed for the rest');
    }
  });

  it('blocks a changed tool even when the profile denies it, and names hintbox approve', () => {
    const d = decideApproval({ ...base, pin: 'changed', rule: 'deny' });
    assert.equal(d.action, 'blocked');
    assert.match(d.reasons[0]!, /hintbox approve/);
    assert.equal(d.retryOnTimeout, false);
  });

  it('runs a destructive tool of a trusted server on a pre-approval, and credits the pre-approval', () => {
    const d = decideApproval({ ...base, preApproved: true });
    assert.equal(d.action, 'run');
    assert.equal(d.decidedBy, 'pre-approval');
    assert.deepEqual(d.warnings, ['irreversible', 'data-may-leave'], 'warnings stay for the audit trail');
  });

  it('credits the missing pin when it turns an auto run into a confirmation', () => {
    const d = decideApproval({
      ...base,
      pin: 'unpinned',
      hints: { readOnlyHint: true, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    });
    assert.equal(d.action, 'confirm');
    assert.equal(d.decidedBy, 'pin');
  });
});
