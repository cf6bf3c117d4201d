// Compiles hintbox's sandbox gate (native/hintbox-gate.c) into dist/hintbox-gate: a static
// binary that hintbox binds into every sandbox as its first program (see the C file for why).
// Needs a C compiler and a static libc (Debian: gcc and libc6-dev); CC overrides the compiler.
// hintbox checks at run time that the binary is static and fits this machine (src/engine/docker/gate.ts).
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import process from 'node:process';

const cc = process.env.CC || 'cc';
const out = 'dist/hintbox-gate';
mkdirSync('dist', { recursive: true });
try {
  execFileSync(cc, ['-static', '-Os', '-s', '-Wall', '-Wextra', '-Werror', '-o', out, 'native/hintbox-gate.c'], {
    stdio: 'inherit',
  });
} catch (error) {
  process.stderr.write(
    `build-gate: could not compile native/hintbox-gate.c with ${cc} (${error.message}); ` +
      'hintbox needs a C compiler and a static libc to build its sandbox gate (Debian: apt-get install gcc libc6-dev)\n',
  );
  process.exit(1);
}
