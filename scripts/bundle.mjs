// Bundles the CLI into one ES module (dist/hintbox.mjs): one file to load instead of
// hundreds, so `hintbox run` starts faster and holds less memory. Two parts of dependencies
// that hintbox never uses are left out: dockerode's BuildKit session (gRPC + protobuf) and
// docker-modem's SSH transport (ssh:// DOCKER_HOST).
import { build } from 'esbuild';

const unused = {
  name: 'hintbox-unused',
  setup(b) {
    b.onResolve({ filter: /^\.\/session$/ }, (args) =>
      args.importer.includes('/dockerode/') ? { path: 'dockerode-session', namespace: 'hintbox-unused' } : undefined,
    );
    b.onResolve({ filter: /^\.\/ssh$/ }, (args) =>
      args.importer.includes('/docker-modem/') ? { path: 'docker-modem-ssh', namespace: 'hintbox-unused' } : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: 'hintbox-unused' }, (args) => ({
      contents: `module.exports = function () { throw new Error(${JSON.stringify(
        `${args.path} is not included in the hintbox CLI bundle`,
      )}); };`,
      loader: 'js',
    }));
  },
};

await build({
  entryPoints: ['src/cli/main.ts'],
  outfile: 'dist/hintbox.mjs',
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'esm',
  sourcemap: 'linked',
  legalComments: 'linked',
  banner: {
    // Bundled CommonJS dependencies call require(); give them one.
    js: "import { createRequire as __hintboxCreateRequire } from 'node:module'; const require = __hintboxCreateRequire(import.meta.url);",
  },
  plugins: [unused],
  // PGlite loads its WebAssembly and data files next to its own module: keep it a real import.
  external: ['@electric-sql/pglite'],
  logLevel: 'warning',
});
