import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { PROVES_COMMENT, SECURITY_INVARIANTS } from '../security-invariants.js';

const TEST_DIR = fileURLToPath(new URL('../', import.meta.url));

/** A test as its file declares it: its title, and the invariants its `// proves:` line names. */
interface DeclaredTest {
  title: string;
  proves: string[];
}

/** The `it(…)` calls with a literal title in one file under test/, and the `// proves:` lines left unattached. */
function declaredTests(file: string): { tests: DeclaredTest[]; stray: number } {
  const text = readFileSync(path.join(TEST_DIR, file), 'utf8');
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const tests: DeclaredTest[] = [];
  let attached = 0;
  const visit = (node: ts.Node): void => {
    if (ts.isExpressionStatement(node) && ts.isCallExpression(node.expression)) {
      const [title] = node.expression.arguments;
      if (
        node.expression.expression.getText(source) === 'it' &&
        title &&
        (ts.isStringLiteral(title) || ts.isNoSubstitutionTemplateLiteral(title))
      ) {
        const proves = (ts.getLeadingCommentRanges(text, node.getFullStart()) ?? [])
          .map((range) => PROVES_COMMENT.exec(text.slice(range.pos, range.end))?.[1])
          .filter((ids) => ids !== undefined)
          .flatMap((ids) => ids.split(',').map((id) => id.trim()));
        if (proves.length > 0) attached++;
        tests.push({ title: title.text, proves });
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  const lines = text.split('\n').filter((line) => PROVES_COMMENT.test(line.trim())).length;
  return { tests, stray: lines - attached };
}

/** Every test file under test/ (its path relative to test/). */
function testFiles(dir = TEST_DIR): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : testFiles(full);
    return entry.name.endsWith('.test.ts') ? [path.relative(TEST_DIR, full)] : [];
  });
}

describe('security invariants', () => {
  const declared = new Map(testFiles().map((file) => [file, declaredTests(file)]));

  it('have unique ids', () => {
    const ids = SECURITY_INVARIANTS.map((i) => i.id);
    assert.deepEqual(ids, [...new Set(ids)]);
  });

  for (const invariant of SECURITY_INVARIANTS) {
    it(`${invariant.id} is covered by tests that exist and say they prove it`, () => {
      assert.ok(invariant.tests.length > 0, `${invariant.id} has no test`);
      for (const { file, title } of invariant.tests) {
        const test = declared.get(file)?.tests.find((t) => t.title === title);
        assert.ok(test, `${invariant.id}: no it(${JSON.stringify(title)}) in test/${file}`);
        assert.ok(
          test.proves.includes(invariant.id),
          `${invariant.id}: it(${JSON.stringify(title)}) in test/${file} has no "// proves: ${invariant.id}" line above it`,
        );
      }
    });
  }

  it('every test that says it proves an invariant is listed under that invariant', () => {
    const listed = new Set(
      SECURITY_INVARIANTS.flatMap((i) => i.tests.map((t) => JSON.stringify([i.id, t.file, t.title]))),
    );
    const unlisted = [...declared].flatMap(([file, { tests }]) =>
      tests.flatMap((t) =>
        t.proves
          .filter((id) => !listed.has(JSON.stringify([id, file, t.title])))
          .map((id) => `test/${file}: it(${JSON.stringify(t.title)}) says it proves ${id}`),
      ),
    );
    assert.deepEqual(unlisted, [], 'each claim is in test/security-invariants.ts');
  });

  it('a "// proves:" line stands right above the it(…) of the test it speaks for', () => {
    const stray = [...declared].filter(([, d]) => d.stray !== 0).map(([file, d]) => `test/${file}: ${d.stray}`);
    assert.deepEqual(stray, []);
  });
});
