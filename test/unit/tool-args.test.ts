import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { toolUsage } from '../../bench/tool-args.js';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const tool = (name: string, ...args: string[]) =>
  spawnSync(process.execPath, ['--import', 'tsx', path.join(REPO, 'bench', `${name}.ts`), ...args], {
    encoding: 'utf8',
    cwd: REPO,
  });

describe("the bench tools' flags", () => {
  it('lists each flag with its default under the summary', () => {
    const text = toolUsage('x', 'What x measures.', {
      options: { rounds: { type: 'string', default: '5' }, json: { type: 'boolean' } },
    });
    assert.equal(
      text,
      [
        'usage: node --import tsx bench/x.ts [options]',
        '',
        'What x measures.',
        '',
        '  --rounds VALUE          (default 5)',
        '  --json',
        '  -h, --help',
      ].join('\n'),
    );
  });

  it('prints the usage for --help and exits 0 before measuring anything', () => {
    const result = tool('per-call-counts', '--help');
    assert.equal(result.status, 0, result.stderr);
    assert.match(result.stdout, /^usage: node --import tsx bench\/per-call-counts\.ts/);
    assert.match(result.stdout, /--in-flight VALUE +\(default 1,8,32\)/);
  });

  it('refuses a flag it does not know in one line, exit 2, no stack trace', () => {
    const result = tool('ab-steady', '--bogus');
    assert.equal(result.status, 2);
    assert.equal(result.stderr, "ab-steady: Unknown option '--bogus' (--help lists the flags)\n");
  });

  it("refuses http-front's unknown way, a variant without a command and a batch of 0, each in one line before starting anything", () => {
    const cases: [string[], string][] = [
      [
        ['--ways', 'serve-raw,bogus'],
        'http-front: --ways: no way bogus (ways: serve, front, run, serve-raw, run-raw)\n',
      ],
      [['--variant', 'plain'], 'http-front: --variant plain: expected name=COMMAND[,ARG...]\n'],
      [['--batch', '0'], 'http-front: --batch must be a whole number above 0\n'],
      [
        ['--ways', 'serve-raw', '--variant', 'serve-raw=node'],
        'http-front: serve-raw is named twice (--ways and --variant names must differ)\n',
      ],
    ];
    for (const [args, stderr] of cases) {
      const result = tool('http-front', ...args);
      assert.equal(result.status, 2, args.join(' '));
      assert.equal(result.stderr, stderr);
      assert.equal(result.stdout, '');
    }
  });
});
