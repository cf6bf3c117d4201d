import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  HINT_DEFAULTS,
  HINT_NAMES,
  claimedHints,
  effectiveHints,
  type ClaimedHints,
  type ToolHints,
} from '../../src/policy/hints.js';
import {
  planSandboxes,
  type Ceiling,
  type CeilingMount,
  type SandboxGrant,
  type SandboxPlan,
  type ToolClaim,
} from '../../src/policy/plan-sandboxes.js';

const fixture = JSON.parse(readFileSync(new URL('../fixtures/filesystem-tools.json', import.meta.url), 'utf8')) as {
  tools: ToolClaim[];
};

function ceiling(partial: Partial<Ceiling> = {}): Ceiling {
  return {
    mounts: [{ source: '/srv/projects', target: '/projects', mode: 'rw' }],
    network: 'none',
    split: true,
    overrides: {},
    ...partial,
  };
}

function toolOf(plan: SandboxPlan, name: string) {
  const tool = plan.tools.find((t) => t.name === name);
  assert.ok(tool, `tool ${name} is in the plan`);
  return tool;
}

function sandboxOf(plan: SandboxPlan, toolName: string) {
  const id = toolOf(plan, toolName).sandbox;
  const sandboxes = plan.sandboxes.filter((s) => s.id === id);
  assert.equal(sandboxes.length, 1, `exactly one sandbox has id ${id}`);
  return sandboxes[0]!;
}

describe('planSandboxes on the real filesystem server tools', () => {
  const READ_TOOLS = [
    'read_file',
    'read_text_file',
    'read_media_file',
    'read_multiple_files',
    'list_directory',
    'list_directory_with_sizes',
    'directory_tree',
    'search_files',
    'get_file_info',
    'list_allowed_directories',
  ];
  const WRITE_TOOLS = ['write_file', 'edit_file', 'create_directory', 'move_file'];

  for (const network of ['none', 'open'] as const) {
    it(`splits into a read-only and a read-write sandbox, both offline (network ceiling ${network})`, () => {
      assert.equal(fixture.tools.length, READ_TOOLS.length + WRITE_TOOLS.length);
      const mounts: CeilingMount[] = [
        { source: '/srv/projects', target: '/projects', mode: 'rw' },
        { source: '/srv/notes', target: '/notes', mode: 'rw' },
      ];
      const plan = planSandboxes(fixture.tools, ceiling({ mounts, network }));
      assert.equal(plan.sandboxes.length, 2);

      const ro = sandboxOf(plan, 'read_file');
      assert.deepEqual([...ro.tools].sort(), [...READ_TOOLS].sort());
      assert.equal(ro.network, 'none');
      assert.equal(ro.mounts.length, 2);
      for (const m of ro.mounts) assert.equal(m.readOnly, true, `${m.target} is read-only for read tools`);
      assert.deepEqual(
        ro.mounts.map((m) => [m.source, m.target]),
        mounts.map((m) => [m.source, m.target]),
      );

      const rw = sandboxOf(plan, 'write_file');
      assert.notEqual(rw.id, ro.id);
      assert.deepEqual([...rw.tools].sort(), [...WRITE_TOOLS].sort());
      assert.equal(rw.network, 'none');
      for (const m of rw.mounts) assert.equal(m.readOnly, false, `${m.target} is writable for write tools`);

      for (const name of READ_TOOLS) {
        const t = toolOf(plan, name);
        assert.equal(t.sandbox, ro.id);
        assert.equal(t.enforced, true, `${name} is enforced`);
        assert.deepEqual(t.unenforced, []);
      }
      for (const name of ['write_file', 'edit_file', 'move_file']) {
        const t = toolOf(plan, name);
        assert.equal(t.sandbox, rw.id);
        assert.equal(t.enforced, true, `${name} is enforced`);
      }
      const mkdir = toolOf(plan, 'create_directory');
      assert.equal(mkdir.sandbox, rw.id);
      assert.equal(mkdir.enforced, false);
      assert.deepEqual(
        mkdir.unenforced.map((u) => u.hint),
        ['destructiveHint'],
      );
      assert.match(mkdir.unenforced[0]!.reason, /\/projects/);

      // Discovery runs in the strictest sandbox, which here is the read tools' one.
      assert.equal(plan.strictest.id, ro.id);
      assert.equal(plan.strictest.network, 'none');
      assert.ok(
        plan.strictest.mounts.every((m) => m.readOnly),
        'plan.strictest.mounts.every((m) => m.readOnly)',
      );
    });
  }

  it('keeps claims as claimed and fills in effective hints', () => {
    const plan = planSandboxes(fixture.tools, ceiling());
    const readFile = toolOf(plan, 'read_file');
    assert.deepEqual(readFile.claimed, { readOnlyHint: true, openWorldHint: false });
    assert.deepEqual(readFile.effective, {
      readOnlyHint: true,
      destructiveHint: true,
      idempotentHint: false,
      openWorldHint: false,
    });
    assert.equal(readFile.overridden, false);
  });

  it('with split false puts everything in one read-write sandbox and marks the read tools unenforced', () => {
    const plan = planSandboxes(fixture.tools, ceiling({ split: false }));
    assert.equal(plan.sandboxes.length, 1);
    const only = plan.sandboxes[0]!;
    assert.equal(only.tools.length, fixture.tools.length);
    assert.ok(
      only.mounts.every((m) => !m.readOnly),
      'only.mounts.every((m) => !m.readOnly)',
    );
    assert.equal(only.network, 'none');
    const readFile = toolOf(plan, 'read_file');
    assert.equal(readFile.enforced, false);
    assert.deepEqual(
      readFile.unenforced.map((u) => u.hint),
      ['readOnlyHint'],
    );
    assert.equal(toolOf(plan, 'write_file').enforced, true);
  });
});

// ---------------------------------------------------------------------------------------------
// Exhaustive: every combination of the four hints (true / false / missing), under every ceiling.

type Tri = boolean | undefined;
const TRI: readonly Tri[] = [true, false, undefined];

function allClaimCombos(): ClaimedHints[] {
  const out: ClaimedHints[] = [];
  for (const r of TRI)
    for (const d of TRI)
      for (const i of TRI)
        for (const o of TRI) {
          const c: ClaimedHints = {};
          if (r !== undefined) c.readOnlyHint = r;
          if (d !== undefined) c.destructiveHint = d;
          if (i !== undefined) c.idempotentHint = i;
          if (o !== undefined) c.openWorldHint = o;
          out.push(c);
        }
  return out;
}
const COMBOS = allClaimCombos();

function comboName(c: ClaimedHints): string {
  return HINT_NAMES.map((h) => (c[h] === undefined ? '-' : c[h] ? 'T' : 'F')).join('');
}

/** Independent oracle for the effective hints. */
function oracleEffective(claim: ClaimedHints, override: ClaimedHints | undefined): ToolHints {
  const pick = (h: keyof ToolHints): boolean => {
    const o = override?.[h];
    if (o !== undefined) return o;
    const c = claim[h];
    if (c !== undefined) return c;
    return { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true }[h];
  };
  return {
    readOnlyHint: pick('readOnlyHint'),
    destructiveHint: pick('destructiveHint'),
    idempotentHint: pick('idempotentHint'),
    openWorldHint: pick('openWorldHint'),
  };
}

/** Independent oracle for one tool's own grant (split: true). */
function oracleGrant(eff: ToolHints, c: Ceiling): SandboxGrant {
  return {
    network: eff.openWorldHint && c.network === 'open' ? 'bridge' : 'none',
    mounts: c.mounts.map((m) => ({
      source: m.source,
      target: m.target,
      readOnly: m.mode === 'ro' || eff.readOnlyHint,
    })),
  };
}

function oracleUnenforced(eff: ToolHints, grant: SandboxGrant): string[] {
  const writable = grant.mounts.some((m) => !m.readOnly);
  const out: string[] = [];
  if (eff.readOnlyHint && writable) out.push('readOnlyHint');
  if (!eff.readOnlyHint && !eff.destructiveHint && writable) out.push('destructiveHint');
  if (!eff.openWorldHint && grant.network === 'bridge') out.push('openWorldHint');
  return out.sort();
}

function grantKey(g: SandboxGrant): string {
  return JSON.stringify([g.network, g.mounts.map((m) => [m.source, m.target, m.readOnly])]);
}

/** Overrides for some tools: a deterministic spread over all combos, including empty and partial ones. */
function overridesFor(tools: ToolClaim[]): Record<string, ClaimedHints> {
  const out: Record<string, ClaimedHints> = {};
  tools.forEach((t, i) => {
    if (i % 3 === 0) out[t.name] = COMBOS[(i * 7 + 5) % COMBOS.length]!;
  });
  return out;
}

function checkPlan(tools: ToolClaim[], c: Ceiling, label: string): SandboxPlan {
  const plan = planSandboxes(tools, c);
  assert.equal(plan.tools.length, tools.length, label);

  // sandbox ids unique, every tool in exactly the sandbox it names
  const ids = plan.sandboxes.map((s) => s.id);
  assert.equal(new Set(ids).size, ids.length, `${label}: sandbox ids are unique (${ids.join(', ')})`);
  const keys = plan.sandboxes.map(grantKey);
  assert.equal(new Set(keys).size, keys.length, `${label}: sandboxes have distinct grants`);
  const allListed = plan.sandboxes.flatMap((s) => s.tools).sort();
  assert.deepEqual(allListed, tools.map((t) => t.name).sort(), `${label}: each tool in exactly one sandbox`);
  for (const s of plan.sandboxes) {
    assert.ok(s.tools.length > 0, `${label}: no empty sandbox ${s.id}`);
    for (const name of s.tools) assert.equal(toolOf(plan, name).sandbox, s.id);
  }

  for (const s of plan.sandboxes) {
    // never more than the ceiling
    assert.deepEqual(
      s.mounts.map((m) => [m.source, m.target]),
      c.mounts.map((m) => [m.source, m.target]),
      `${label}: mounts are the ceiling's, in order`,
    );
    s.mounts.forEach((m, i) => {
      if (c.mounts[i]!.mode === 'ro')
        assert.equal(m.readOnly, true, `${label}: ro ceiling mount ${m.target} stays ro in ${s.id}`);
    });
    if (c.network === 'none')
      assert.equal(s.network, 'none', `${label}: network ceiling none gives no network to ${s.id}`);
    assert.ok(s.network === 'none' || s.network === 'bridge', "s.network === 'none' || s.network === 'bridge'");
  }

  const effectives = new Map<string, ToolHints>();
  for (const tool of tools) {
    const t = toolOf(plan, tool.name);
    const claim = claimedHints(tool.annotations);
    const override = c.overrides[tool.name];
    const eff = oracleEffective(claim, override);
    effectives.set(tool.name, eff);
    const where = `${label}: ${tool.name}`;
    assert.deepEqual(t.claimed, claim, `${where}: claimed`);
    assert.deepEqual(t.effective, eff, `${where}: effective`);
    assert.equal(t.overridden, override !== undefined, `${where}: overridden`);
    const s = sandboxOf(plan, tool.name);

    if (c.split) {
      assert.deepEqual({ network: s.network, mounts: s.mounts }, oracleGrant(eff, c), `${where}: grant`);
      if (eff.readOnlyHint)
        assert.ok(
          s.mounts.every((m) => m.readOnly),
          `${where}: read-only tool gets no writable mount`,
        );
      assert.equal(
        s.network === 'bridge',
        eff.openWorldHint && c.network === 'open',
        `${where}: bridge iff open world and open ceiling`,
      );
    }
    const unenforced = t.unenforced.map((u) => u.hint).sort();
    assert.deepEqual(unenforced, oracleUnenforced(eff, s), `${where}: unenforced`);
    assert.equal(t.enforced, unenforced.length === 0, `${where}: enforced`);
    for (const u of t.unenforced) assert.ok(u.reason.length > 0, `${where}: a reason is given`);
  }

  if (c.split) {
    // tools with identical grants share one sandbox, different grants never do
    for (const a of tools)
      for (const b of tools) {
        const same =
          grantKey(oracleGrant(effectives.get(a.name)!, c)) === grantKey(oracleGrant(effectives.get(b.name)!, c));
        assert.equal(
          toolOf(plan, a.name).sandbox === toolOf(plan, b.name).sandbox,
          same,
          `${label}: ${a.name} / ${b.name} share iff same grant`,
        );
      }
  } else if (tools.length > 0) {
    assert.equal(plan.sandboxes.length, 1, `${label}: split false gives exactly one sandbox`);
    const only = plan.sandboxes[0]!;
    const anyOpen = [...effectives.values()].some((e) => e.openWorldHint);
    assert.equal(only.network, anyOpen && c.network === 'open' ? 'bridge' : 'none', `${label}: union network`);
    only.mounts.forEach((m, i) => {
      const anyWrites = [...effectives.values()].some((e) => !e.readOnlyHint);
      assert.equal(m.readOnly, c.mounts[i]!.mode === 'ro' || !anyWrites, `${label}: union mount ${m.target}`);
    });
  }

  // strictest: all read-only, offline
  assert.equal(plan.strictest.network, 'none');
  assert.ok(
    plan.strictest.mounts.every((m) => m.readOnly),
    'plan.strictest.mounts.every((m) => m.readOnly)',
  );
  assert.equal(plan.strictest.mounts.length, c.mounts.length);
  return plan;
}

describe('planSandboxes: every hint combination under every ceiling', () => {
  assert.equal(COMBOS.length, 81);
  const tools: ToolClaim[] = COMBOS.map((c) => ({ name: `t_${comboName(c)}`, annotations: { ...c } }));

  for (const network of ['none', 'open'] as const)
    for (const mode of ['ro', 'rw'] as const)
      for (const split of [true, false]) {
        const mounts: CeilingMount[] = [
          { source: '/srv/a', target: '/a', mode },
          { source: '/srv/b', target: '/b', mode },
        ];
        const label = `network=${network} mode=${mode} split=${split}`;

        it(`${label}: each tool alone`, () => {
          for (const tool of tools) checkPlan([tool], ceiling({ mounts, network, split }), `${label} alone`);
        });

        it(`${label}: all 81 tools together`, () => {
          const plan = checkPlan(tools, ceiling({ mounts, network, split }), label);
          if (split) {
            // read-only vs writing × offline vs online: at most 4 sandboxes, and the ceiling decides how many
            const expected = (mode === 'rw' ? 2 : 1) * (network === 'open' ? 2 : 1);
            assert.equal(plan.sandboxes.length, expected);
          }
        });

        it(`${label}: with operator overrides`, () => {
          const overrides = overridesFor(tools);
          assert.ok(Object.keys(overrides).length > 20, 'Object.keys(overrides).length > 20');
          checkPlan(tools, ceiling({ mounts, network, split, overrides }), `${label} overrides`);
        });

        it(`${label}: missing annotations get exactly the ceiling`, () => {
          for (const annotations of [undefined, {}, null, { readOnlyHint: 'yes', openWorldHint: 0 }]) {
            const plan = planSandboxes([{ name: 'bare', annotations }], ceiling({ mounts, network, split }));
            assert.equal(plan.sandboxes.length, 1);
            const s = plan.sandboxes[0]!;
            assert.equal(s.network, network === 'open' ? 'bridge' : 'none');
            assert.deepEqual(
              s.mounts,
              mounts.map((m) => ({ source: m.source, target: m.target, readOnly: m.mode === 'ro' })),
            );
            const t = toolOf(plan, 'bare');
            assert.deepEqual(t.claimed, {});
            assert.deepEqual(t.effective, { ...HINT_DEFAULTS });
            assert.equal(t.enforced, true);
          }
        });
      }

  // proves: RO-MOUNTS
  it('a mixed ceiling (one ro, one rw mount) never makes the ro mount writable', () => {
    const mounts: CeilingMount[] = [
      { source: '/srv/ro', target: '/ro', mode: 'ro' },
      { source: '/srv/rw', target: '/rw', mode: 'rw' },
    ];
    for (const split of [true, false])
      for (const network of ['none', 'open'] as const) {
        const plan = checkPlan(tools, ceiling({ mounts, network, split }), `mixed ${network} ${split}`);
        if (split) {
          const writer = sandboxOf(plan, `t_${comboName({ readOnlyHint: false })}`);
          assert.deepEqual(
            writer.mounts.map((m) => m.readOnly),
            [true, false],
          );
          const reader = sandboxOf(plan, `t_${comboName({ readOnlyHint: true })}`);
          assert.deepEqual(
            reader.mounts.map((m) => m.readOnly),
            [true, true],
          );
          assert.notEqual(writer.id, reader.id);
        }
      }
  });

  it('no mounts at all still separates online from offline tools', () => {
    const plan = checkPlan(tools, ceiling({ mounts: [], network: 'open' }), 'no mounts');
    assert.equal(plan.sandboxes.length, 2);
    assert.deepEqual(plan.sandboxes.map((s) => s.network).sort(), ['bridge', 'none']);
  });

  it('an empty tool list plans no sandboxes but still has a strictest one', () => {
    for (const split of [true, false]) {
      const plan = planSandboxes([], ceiling({ split, network: 'open' }));
      assert.deepEqual(plan.tools, []);
      assert.deepEqual(plan.sandboxes, []);
      assert.equal(plan.strictest.network, 'none');
      assert.ok(
        plan.strictest.mounts.every((m) => m.readOnly),
        'plan.strictest.mounts.every((m) => m.readOnly)',
      );
    }
  });
});

describe('planSandboxes: operator overrides', () => {
  it('replace the claim field by field and can narrow a lying tool', () => {
    const c = ceiling({
      network: 'open',
      overrides: { liar: { readOnlyHint: false }, chatty: { openWorldHint: false } },
    });
    const plan = planSandboxes(
      [
        { name: 'liar', annotations: { readOnlyHint: true, openWorldHint: false, destructiveHint: false } },
        { name: 'chatty', annotations: { readOnlyHint: true } },
      ],
      c,
    );
    const liar = toolOf(plan, 'liar');
    assert.equal(liar.overridden, true);
    // readOnly replaced, the other claims kept
    assert.deepEqual(liar.effective, {
      readOnlyHint: false,
      destructiveHint: false,
      idempotentHint: false,
      openWorldHint: false,
    });
    assert.ok(
      sandboxOf(plan, 'liar').mounts.every((m) => !m.readOnly),
      "sandboxOf(plan, 'liar').mounts.every((m) => !m.readOnly)",
    );
    assert.equal(sandboxOf(plan, 'liar').network, 'none');

    const chatty = toolOf(plan, 'chatty');
    assert.deepEqual(chatty.effective, {
      readOnlyHint: true,
      destructiveHint: true,
      idempotentHint: false,
      openWorldHint: false,
    });
    assert.equal(sandboxOf(plan, 'chatty').network, 'none');
    assert.ok(
      sandboxOf(plan, 'chatty').mounts.every((m) => m.readOnly),
      "sandboxOf(plan, 'chatty').mounts.every((m) => m.readOnly)",
    );
  });

  // proves: CEILING
  it('an override cannot widen past the ceiling', () => {
    const c = ceiling({
      mounts: [{ source: '/srv/a', target: '/a', mode: 'ro' }],
      network: 'none',
      overrides: { t: { readOnlyHint: false, openWorldHint: true } },
    });
    const plan = planSandboxes([{ name: 't', annotations: { readOnlyHint: true, openWorldHint: false } }], c);
    const s = sandboxOf(plan, 't');
    assert.equal(s.network, 'none');
    assert.equal(s.mounts[0]!.readOnly, true);
  });

  it('an override for a tool that is not listed changes nothing', () => {
    const plan = planSandboxes(
      [{ name: 'a', annotations: { readOnlyHint: true } }],
      ceiling({ overrides: { b: { readOnlyHint: false } } }),
    );
    assert.equal(toolOf(plan, 'a').overridden, false);
    assert.ok(
      sandboxOf(plan, 'a').mounts.every((m) => m.readOnly),
      "sandboxOf(plan, 'a').mounts.every((m) => m.readOnly)",
    );
  });
});

describe('planSandboxes: split false reports what the shared sandbox does not enforce', () => {
  // proves: HONEST-PLAN
  it('a read-only tool sharing with a writing tool is not enforced (readOnlyHint)', () => {
    const plan = planSandboxes(
      [
        { name: 'reader', annotations: { readOnlyHint: true, openWorldHint: false } },
        { name: 'writer', annotations: { readOnlyHint: false, destructiveHint: true, openWorldHint: false } },
      ],
      ceiling({ split: false }),
    );
    assert.equal(plan.sandboxes.length, 1);
    assert.equal(toolOf(plan, 'reader').sandbox, toolOf(plan, 'writer').sandbox);
    const reader = toolOf(plan, 'reader');
    assert.equal(reader.enforced, false);
    assert.deepEqual(
      reader.unenforced.map((u) => u.hint),
      ['readOnlyHint'],
    );
    assert.match(reader.unenforced[0]!.reason, /\/projects/);
    assert.equal(toolOf(plan, 'writer').enforced, true);
  });

  // proves: HONEST-PLAN
  it('a closed-world tool sharing with an open-world tool under an open ceiling is not enforced (openWorldHint)', () => {
    const plan = planSandboxes(
      [
        { name: 'local', annotations: { readOnlyHint: true, openWorldHint: false } },
        { name: 'web', annotations: { readOnlyHint: true, openWorldHint: true } },
      ],
      ceiling({ split: false, network: 'open' }),
    );
    assert.equal(plan.sandboxes.length, 1);
    assert.equal(plan.sandboxes[0]!.network, 'bridge');
    const local = toolOf(plan, 'local');
    assert.equal(local.enforced, false);
    assert.deepEqual(
      local.unenforced.map((u) => u.hint),
      ['openWorldHint'],
    );
    assert.equal(toolOf(plan, 'web').enforced, true);
  });

  it('the same pair under a none ceiling is enforced', () => {
    const plan = planSandboxes(
      [
        { name: 'local', annotations: { readOnlyHint: true, openWorldHint: false } },
        { name: 'web', annotations: { readOnlyHint: true, openWorldHint: true } },
      ],
      ceiling({ split: false, network: 'none' }),
    );
    assert.equal(plan.sandboxes[0]!.network, 'none');
    assert.ok(
      plan.tools.every((t) => t.enforced),
      'plan.tools.every((t) => t.enforced)',
    );
  });

  it('with split true the same tools are separated and all enforced', () => {
    const plan = planSandboxes(
      [
        { name: 'reader', annotations: { readOnlyHint: true, openWorldHint: false } },
        { name: 'writer', annotations: { readOnlyHint: false, destructiveHint: true, openWorldHint: true } },
      ],
      ceiling({ split: true, network: 'open' }),
    );
    assert.equal(plan.sandboxes.length, 2);
    assert.ok(
      plan.tools.every((t) => t.enforced),
      'plan.tools.every((t) => t.enforced)',
    );
  });
});

describe('hints', () => {
  it('effectiveHints fills in the spec defaults', () => {
    assert.deepEqual(effectiveHints({}), {
      readOnlyHint: false,
      destructiveHint: true,
      idempotentHint: false,
      openWorldHint: true,
    });
    assert.deepEqual({ ...HINT_DEFAULTS }, effectiveHints({}));
    assert.ok(Object.isFrozen(HINT_DEFAULTS), 'Object.isFrozen(HINT_DEFAULTS)');
  });

  it('effectiveHints: override beats claim beats default, for every combination', () => {
    for (const claim of COMBOS)
      for (const override of COMBOS) {
        const got = effectiveHints(claim, override);
        assert.deepEqual(got, oracleEffective(claim, override), `${comboName(claim)} / ${comboName(override)}`);
      }
  });

  it('effectiveHints does not infer one hint from another', () => {
    assert.deepEqual(effectiveHints({ readOnlyHint: true }), {
      readOnlyHint: true,
      destructiveHint: true,
      idempotentHint: false,
      openWorldHint: true,
    });
  });

  it('claimedHints keeps only booleans', () => {
    assert.deepEqual(
      claimedHints({
        readOnlyHint: 'true',
        destructiveHint: 0,
        idempotentHint: null,
        openWorldHint: false,
        title: 'x',
        other: true,
      }),
      { openWorldHint: false },
    );
    assert.deepEqual(
      claimedHints({ readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: true }),
      {
        readOnlyHint: true,
        destructiveHint: false,
        idempotentHint: true,
        openWorldHint: true,
      },
    );
    for (const junk of [undefined, null, 'readOnly', 42, true]) assert.deepEqual(claimedHints(junk), {});
    // missing hints are absent, not undefined-valued
    assert.deepEqual(Object.keys(claimedHints({ readOnlyHint: true, openWorldHint: 'no' })), ['readOnlyHint']);
  });
});

describe('planSandboxes: database roles', () => {
  const PRIVILEGES = ['read', 'append', 'write'] as const;
  const rank = (p: string | undefined) => PRIVILEGES.indexOf(p as (typeof PRIVILEGES)[number]);
  const needed = (h: ToolHints) => (h.readOnlyHint ? 'read' : h.destructiveHint ? 'write' : 'append');
  const tools: ToolClaim[] = COMBOS.map((c) => ({ name: `t_${comboName(c)}`, annotations: { ...c } }));

  // proves: DB-READ
  it('a role never exceeds what the hints claim nor the profile ceiling, for every combination', () => {
    for (const database of PRIVILEGES)
      for (const split of [true, false])
        for (const mounts of [[], [{ source: '/srv/a', target: '/a', mode: 'rw' as const }]]) {
          const plan = planSandboxes(tools, ceiling({ mounts, split, database }));
          const label = `database=${database} split=${split} mounts=${mounts.length}`;
          for (const tool of plan.tools) {
            const granted = sandboxOf(plan, tool.name).database;
            assert.ok(rank(granted) >= 0, `${label} ${tool.name}: every sandbox has a role`);
            assert.ok(rank(granted) <= rank(database), `${label} ${tool.name}: ${granted} exceeds the ceiling`);
            const claimed = needed(tool.effective);
            if (split) {
              assert.equal(rank(granted), Math.min(rank(claimed), rank(database)), `${label} ${tool.name}`);
            }
            // Whenever the role can do more than the tool claims, the plan says so.
            const dbUnenforced = tool.unenforced.some((u) => u.reason.startsWith('database role'));
            assert.equal(dbUnenforced, rank(granted) > rank(claimed), `${label} ${tool.name}: enforced column`);
          }
          assert.ok(
            plan.sandboxes.every((s) => s.id.endsWith(`-db${s.database}`)),
            `${label}: ids name the role privilege`,
          );
        }
  });

  it('a shared sandbox (split: false) gets the most its tools need, capped by the ceiling', () => {
    const READ = { readOnlyHint: true, openWorldHint: false };
    const APPEND = { readOnlyHint: false, destructiveHint: false, openWorldHint: false };
    const WRITE = { readOnlyHint: false, destructiveHint: true, openWorldHint: false };
    const roles = (hints: ToolClaim['annotations'][], database: (typeof PRIVILEGES)[number]) =>
      planSandboxes(
        hints.map((annotations, i) => ({ name: `t${i}`, annotations })),
        ceiling({ mounts: [], split: false, database }),
      ).sandboxes.map((s) => s.database);
    assert.deepEqual(roles([READ, APPEND], 'write'), ['append']);
    assert.deepEqual(roles([READ, WRITE, APPEND], 'write'), ['write']);
    assert.deepEqual(roles([READ, WRITE], 'append'), ['append']);
    assert.deepEqual(roles([READ], 'write'), ['read']);
  });

  it('read-only tools get a read role, adding tools append, destructive tools write, each its own sandbox', () => {
    const plan = planSandboxes(
      [
        { name: 'select', annotations: { readOnlyHint: true, openWorldHint: false } },
        { name: 'insert', annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: false } },
        { name: 'update', annotations: { readOnlyHint: false, destructiveHint: true, openWorldHint: false } },
      ],
      ceiling({ mounts: [], database: 'write' }),
    );
    assert.deepEqual(
      plan.tools.map((t) => [t.name, t.sandbox, t.enforced]),
      [
        ['select', 'nomounts-offline-dbread', true],
        ['insert', 'nomounts-offline-dbappend', true],
        ['update', 'nomounts-offline-dbwrite', true],
      ],
    );
    assert.equal(plan.strictest.id, 'nomounts-offline-dbread');
    assert.equal(plan.strictest.database, 'read');
  });

  it('a read ceiling gives every tool a read role: writing tools then share the read sandbox', () => {
    const plan = planSandboxes(tools, ceiling({ mounts: [], database: 'read' }));
    assert.deepEqual([...new Set(plan.sandboxes.map((s) => s.database))], ['read']);
    assert.ok(
      plan.tools.every((t) => t.enforced),
      'a role narrower than the claim enforces the claim',
    );
  });

  it('split false gives the one sandbox the most any tool needs, and marks narrower database claims unenforced', () => {
    const plan = planSandboxes(
      [
        { name: 'select', annotations: { readOnlyHint: true, openWorldHint: false } },
        { name: 'insert', annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: false } },
      ],
      ceiling({ mounts: [], database: 'write', split: false }),
    );
    assert.deepEqual(
      plan.sandboxes.map((s) => [s.id, s.database]),
      [['nomounts-offline-dbappend', 'append']],
    );
    assert.deepEqual(toolOf(plan, 'select').unenforced, [
      { hint: 'readOnlyHint', reason: 'database role has append privilege (shared with tools that need it)' },
    ]);
    assert.equal(toolOf(plan, 'insert').enforced, true);
  });

  it('an adding tool is enforced by its append role alone, but not when it also has a read-write mount', () => {
    const insert = {
      name: 'insert',
      annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: false },
    };
    assert.equal(toolOf(planSandboxes([insert], ceiling({ mounts: [], database: 'write' })), 'insert').enforced, true);
    const withMount = toolOf(planSandboxes([insert], ceiling({ database: 'write' })), 'insert');
    assert.deepEqual(
      withMount.unenforced.map((u) => u.hint),
      ['destructiveHint'],
    );
  });

  it('without a database section no sandbox has a role and ids are unchanged', () => {
    const plan = planSandboxes(tools, ceiling());
    assert.ok(
      plan.sandboxes.every((s) => s.database === undefined && !s.id.includes('-db')),
      'no database in any grant',
    );
    assert.equal(plan.strictest.database, undefined);
  });
});
