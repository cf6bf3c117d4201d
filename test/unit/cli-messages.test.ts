import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseCommandArgs } from '../../src/cli/parse-command-args.js';
import { declaredArgs } from '../../src/engine/docker/image-builder.js';
import { loadProfile } from '../../src/profile/load-profile.js';
import { exitCodeOf } from '../../src/util/hintbox-error.js';
import { scratchFolder } from '../support/scratch-folder.js';

const install = { options: { rebuild: { type: 'boolean' }, client: { type: 'string' } } } as const;

function usage(run: () => unknown): { message: string; code: number } {
  try {
    run();
  } catch (error) {
    return { message: (error as Error).message, code: exitCodeOf(error) };
  }
  throw new Error('expected a usage error');
}

describe("the CLI's messages", () => {
  it('an unknown flag: one line in hintbox words, the flag it most likely meant, exit 2', () => {
    assert.deepEqual(
      usage(() => parseCommandArgs('install', install, ['p.yaml', '--rebiuld'])),
      { message: 'install: unknown option --rebiuld (did you mean --rebuild?); see hintbox install --help', code: 2 },
    );
    assert.equal(
      usage(() => parseCommandArgs('install', install, ['--client'])).message,
      'install: --client needs a value; see hintbox install --help',
    );
    assert.equal(
      usage(() => parseCommandArgs('install', install, ['--rebuild=yes'])).message,
      'install: --rebuild takes no value; see hintbox install --help',
    );
    assert.equal(
      usage(() => parseCommandArgs('install', install, ['--zzz'])).message,
      'install: unknown option --zzz; see hintbox install --help',
    );
    assert.equal(parseCommandArgs('install', install, ['p.yaml', '--verbose']).values.verbose, true);
  });

  it('a misspelt profile key: the key it most likely meant; a missing or folder profile: plain words, exit 2', () => {
    const dir = scratchFolder('hintbox-messages-');
    const file = path.join(dir, 'p.yaml');
    writeFileSync(file, 'name: p\nserver:\n  image: a\n  imagee: b\nlimits:\n  memroy: 1g\nmount: []\n');
    const bad = usage(() => loadProfile(file, { vars: {}, ownPaths: [] }));
    assert.equal(bad.code, 2);
    assert.match(bad.message, /p\.yaml: server\.imagee: unknown key \(did you mean image\?\)$/m);
    assert.match(bad.message, /p\.yaml: limits\.memroy: unknown key \(did you mean memory\?\)$/m);
    assert.match(bad.message, /p\.yaml: mount: unknown key \(did you mean mounts\?\)$/m);
    const missing = usage(() => loadProfile(path.join(dir, 'none.yaml')));
    assert.equal(missing.code, 2);
    assert.match(missing.message, /none\.yaml: no such file \(give the path of a profile/);
    assert.doesNotMatch(missing.message, /ENOENT/);
    assert.match(usage(() => loadProfile(dir)).message, /: a folder, not a profile file/);
  });

  it('a build gets only the args its Dockerfile declares (no "build-args … were not consumed")', () => {
    const args = { BASE_IMAGE: 'debian:trixie-slim', NODE_SERVER_IMAGE: 'hintbox/node-server:trixie' };
    assert.deepEqual(declaredArgs(args, 'ARG NODE_SERVER_IMAGE=x\nFROM ${NODE_SERVER_IMAGE}\n'), {
      NODE_SERVER_IMAGE: 'hintbox/node-server:trixie',
    });
    assert.deepEqual(declaredArgs(args, 'arg BASE_IMAGE\nFROM ${BASE_IMAGE}\n'), { BASE_IMAGE: 'debian:trixie-slim' });
  });
});
