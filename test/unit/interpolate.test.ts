import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  InterpolationError,
  interpolate,
  interpolateTree,
  referencedVariables,
} from '../../src/profile/interpolate.js';
import { SANDBOX_VALUE_NAMES, isSandboxValueField } from '../../src/profile/sandbox-values.js';

describe('interpolate', () => {
  it('replaces ${VAR} with its value, anywhere in the string', () => {
    assert.equal(interpolate('${A}', { A: 'x' }), 'x');
    assert.equal(interpolate('pre-${A}-mid-${B}-post', { A: '1', B: '2' }), 'pre-1-mid-2-post');
    assert.equal(interpolate('${A}${A}', { A: 'ab' }), 'abab');
  });

  it('leaves text without ${ alone, including lone $ and $NAME', () => {
    for (const s of ['plain', '', 'cost: $5', '$HOME/x', 'a$', '{A}', '}']) assert.equal(interpolate(s, {}), s);
  });

  it('$$ is a literal $', () => {
    assert.equal(interpolate('$${A}', { A: 'x' }), '${A}');
    assert.equal(interpolate('a$$b', {}), 'a$b');
    assert.equal(interpolate('$$$${A}', { A: 'x' }), '$${A}');
    assert.equal(interpolate('$$${A}', { A: 'x' }), '$x');
  });

  it('${VAR:-default} uses the default when VAR is missing or empty', () => {
    assert.equal(interpolate('${A:-def}', {}), 'def');
    assert.equal(interpolate('${A:-def}', { A: '' }), 'def');
    assert.equal(interpolate('${A:-def}', { A: 'set' }), 'set');
    assert.equal(interpolate('${A:-}', {}), '');
    assert.equal(interpolate('${A:-with spaces and :- and -}', {}), 'with spaces and :- and -');
    assert.equal(interpolate('${IMG:-node:20-bookworm}', {}), 'node:20-bookworm');
  });

  it('the default may itself hold ${…}, nested', () => {
    assert.equal(interpolate('${A:-${B}}', { B: 'b' }), 'b');
    assert.equal(interpolate('${A:-${B}}', { A: 'a', B: 'b' }), 'a');
    assert.equal(interpolate('${A:-${B:-${C}}}', { C: 'c' }), 'c');
    assert.equal(interpolate('${A:-x${B:-y}z}/tail', {}), 'xyz/tail');
    assert.equal(interpolate('${A:-$${B}}', {}), '${B}');
  });

  it('a default is not evaluated when the variable is set', () => {
    assert.equal(interpolate('${A:-${MISSING}}', { A: 'a' }), 'a');
  });

  it('a missing variable without default is an error naming it', () => {
    assert.throws(
      () => interpolate('${API_KEY}', {}),
      (e: unknown) => e instanceof InterpolationError && /API_KEY/.test(e.message),
    );
    assert.throws(
      () => interpolate('${A:-${B}}', {}),
      (e: unknown) => e instanceof InterpolationError && /\bB\b/.test(e.message),
    );
    assert.throws(() => interpolate('ok ${A} ${B}', { A: '1' }), /\bB\b/);
  });

  it('rejects malformed references', () => {
    for (const bad of ['${A', '${A:-${B}', '${}', '${1A}', '${A-B}', '${A:default}', '${A B}', '${A:?err}']) {
      assert.throws(() => interpolate(bad, { A: 'a', B: 'b' }), InterpolationError, bad);
    }
  });

  it('does not read process.env', () => {
    process.env.HINTBOX_INTERPOLATE_CANARY = 'leak';
    try {
      assert.throws(() => interpolate('${HINTBOX_INTERPOLATE_CANARY}', {}), InterpolationError);
      assert.equal(interpolate('${HINTBOX_INTERPOLATE_CANARY:-safe}', {}), 'safe');
    } finally {
      delete process.env.HINTBOX_INTERPOLATE_CANARY;
    }
  });
});

describe('interpolateTree', () => {
  it('interpolates every string in objects and arrays, leaving other values as they are', () => {
    const errors: Array<[(string | number)[], string]> = [];
    const out = interpolateTree({ a: '${X}', b: ['${X:-d}', 3, true, null, { c: 'lit' }], n: 7 }, { X: 'x' }, (p, m) =>
      errors.push([p, m]),
    );
    assert.deepEqual(out, { a: 'x', b: ['x', 3, true, null, { c: 'lit' }], n: 7 });
    assert.deepEqual(errors, []);
  });

  it('reports every error with its path and keeps going', () => {
    const errors: Array<[(string | number)[], string]> = [];
    const input = { server: { image: '${IMG}' }, mounts: [{ source: 'ok' }, { source: '${SRC' }], env: { K: '${K}' } };
    const out = interpolateTree(input, {}, (p, m) => errors.push([p, m]));
    assert.deepEqual(
      errors.map(([p]) => p),
      [
        ['server', 'image'],
        ['mounts', 1, 'source'],
        ['env', 'K'],
      ],
    );
    assert.match(errors[0]![1], /IMG/);
    assert.match(errors[1]![1], /unclosed/);
    // failing strings are left as written
    assert.deepEqual(out, input);
  });

  it('does not interpolate keys', () => {
    const out = interpolateTree({ '${K}': 'v' }, { K: 'k' }, () => assert.fail('no error expected'));
    assert.deepEqual(out, { '${K}': 'v' });
  });
});

describe('${sandbox:NAME}', () => {
  const allowed = { sandboxValues: true };
  /** Variables that fail the test when anything is looked up in them. */
  const untouchable = new Proxy<Record<string, string>>(
    {},
    {
      get: (_, name) => assert.fail(`the host's variables were consulted for ${String(name)}`),
    },
  );

  // proves: SANDBOX-VALUES
  it('is kept as written where allowed, and the host variables are never consulted for it', () => {
    for (const name of SANDBOX_VALUE_NAMES) {
      assert.equal(interpolate(`\${sandbox:${name}}`, untouchable, allowed), `\${sandbox:${name}}`);
    }
    assert.equal(
      interpolate('--url=${sandbox:DATABASE_URL} --host ${sandbox:PGHOST}', untouchable, allowed),
      '--url=${sandbox:DATABASE_URL} --host ${sandbox:PGHOST}',
    );
  });

  it("a mount target by the mount's name (mount.NAME) is kept too; its name is checked at load, against the mounts", () => {
    for (const ref of ['${sandbox:mount.workspace}', '${sandbox:mount.target_dir}', '--root=${sandbox:mount.a-1}']) {
      assert.equal(interpolate(ref, untouchable, allowed), ref);
    }
    for (const bad of ['${sandbox:mount.}', '${sandbox:mount.Work Space}', '${sandbox:mount}', '${sandbox:MOUNT.x}']) {
      assert.throws(() => interpolate(bad, untouchable, allowed), /unknown sandbox value .*or mount\.<name>/, bad);
    }
    assert.throws(() => interpolate('${sandbox:mount.workspace}', untouchable), /only allowed in server.args and env/);
  });

  // proves: SANDBOX-VALUES
  it('is not the host variable of the same name, in process.env or in vars', () => {
    process.env.DATABASE_URL = 'postgresql://host:secret@db/leak';
    try {
      const vars = { DATABASE_URL: 'postgresql://host:secret@db/leak', 'sandbox:DATABASE_URL': 'leak' };
      assert.equal(interpolate('${sandbox:DATABASE_URL}', vars, allowed), '${sandbox:DATABASE_URL}');
    } finally {
      delete process.env.DATABASE_URL;
    }
  });

  it('may be a default, and mixes with host variables', () => {
    assert.equal(interpolate('${URL:-${sandbox:DATABASE_URL}}', {}, allowed), '${sandbox:DATABASE_URL}');
    assert.equal(interpolate('${URL:-${sandbox:DATABASE_URL}}', { URL: 'u' }, allowed), 'u');
    assert.equal(interpolate('${A}=${sandbox:PGUSER}', { A: 'user' }, allowed), 'user=${sandbox:PGUSER}');
  });

  it('refuses an unknown name, naming the known ones', () => {
    for (const bad of ['${sandbox:HOME}', '${sandbox:}', '${sandbox:database_url}', '${sandbox:DATABASE_URL:-x}']) {
      assert.throws(
        () => interpolate(bad, untouchable, allowed),
        /unknown sandbox value .*expected one of DATABASE_URL, PGHOST/,
        bad,
      );
    }
  });

  it('is refused where not allowed (the default), also inside a default', () => {
    assert.throws(() => interpolate('${sandbox:DATABASE_URL}', untouchable), /only allowed in server.args and env/);
    assert.throws(() => interpolate('${X:-${sandbox:PGHOST}}', {}), /only allowed in server.args and env/);
  });

  // proves: SANDBOX-VALUES
  it('cannot be made by $$ or by a host value: a reference left in a string is one the profile wrote', () => {
    assert.throws(() => interpolate('$${sandbox:DATABASE_URL}', {}, allowed), /may only be written as a sandbox value/);
    assert.throws(() => interpolate('${X}', { X: '${sandbox:DATABASE_URL}' }, allowed), /may only be written/);
    assert.throws(() => interpolate('${X}', { X: '${sandbox:PGHOST}' }), /may only be written/);
    assert.equal(interpolate('$${NOT_SANDBOX}', {}, allowed), '${NOT_SANDBOX}');
  });

  it('interpolateTree allows it only at the paths it is told', () => {
    const errors: Array<[(string | number)[], string]> = [];
    const tree = {
      server: { image: '${sandbox:PGHOST}', args: ['${sandbox:DATABASE_URL}'] },
      env: { U: '${sandbox:PGUSER}' },
    };
    const out = interpolateTree(tree, untouchable, (p, m) => errors.push([p, m]), isSandboxValueField);
    assert.deepEqual(out, tree);
    assert.deepEqual(
      errors.map(([p]) => p),
      [['server', 'image']],
    );
    const none: Array<(string | number)[]> = [];
    interpolateTree(tree, untouchable, (p) => none.push(p));
    assert.equal(none.length, 3, 'by default nowhere');
  });
});

describe('referencedVariables', () => {
  it('lists every ${NAME} a tree reads, defaults included, and none for $$ or ${sandbox:…}', () => {
    const tree = {
      a: '${A}/${B}',
      b: ['${C:-${D:-x}}', '$${E}', '${sandbox:mount.w}'],
      c: { d: 'plain', e: 3 },
    };
    assert.deepEqual(referencedVariables(tree), ['A', 'B', 'C', 'D']);
  });
});
