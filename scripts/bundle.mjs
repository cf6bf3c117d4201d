// Bundles the CLI into dist/hintbox.mjs and a few chunks beside it (dist/chunks/): a handful of
// files to load instead of hundreds, so `hintbox run` starts faster and holds less memory. Each
// command is a chunk of its own, loaded only when it runs (src/cli/main.ts): Node 20 compiles an
// ES module's whole text at every start, so the code of commands not run (serve, import, the
// audit reader, …) is never read — about 12 MB less resident for `hintbox run` than one file.
// Minified (each file's source map beside it). Names are not kept (no esbuild keepNames): it
// redefines `name` on every function it renames, about 1 MB more V8 heap for `hintbox run`,
// and nothing of hintbox reads a function's or class's name. Parts of dependencies that hintbox never uses are left out:
// dockerode's BuildKit session (gRPC + protobuf) and BuildKit progress decoder (protobuf;
// hintbox builds with the classic builder and docker-modem's followProgress), and dockerode's
// packing of a context folder (tar-fs 2 and zlib: hintbox hands buildImage a tar stream of
// its own, packed by tar-fs 3 loaded only for a build), and
// docker-modem's SSH transport (ssh:// DOCKER_HOST), and zod's error messages in languages
// other than English (a fifth of the bundle; hintbox never switches zod's locale), and what
// @kubernetes/client-node's KubeConfig imports for its generated API clients (makeApiClient)
// and fetch options: the Kubernetes engine uses only its credentials and the attach (a
// megabyte less to compile at every start). ajv (the SDK's schema validator) is evaluated only when
// a first schema is validated, and Node's https, tls and tty only when used (see the plugin). The
// bin's node flags and malloc settings are its shebang, kept from src/cli/main.ts (their reasons
// are there; measured in docs/benchmarks.md).
import { rmSync } from 'node:fs';
import path from 'node:path';
import { build } from 'esbuild';

const unused = {
  name: 'hintbox-unused',
  setup(b) {
    b.onResolve({ filter: /^\.\/(session|buildkit)$/ }, (args) =>
      args.importer.includes('/dockerode/')
        ? { path: `dockerode-${args.path.slice(2)}`, namespace: 'hintbox-unused' }
        : undefined,
    );
    b.onResolve({ filter: /^(tar-fs|zlib)$/ }, (args) =>
      args.importer.endsWith('/dockerode/lib/util.js')
        ? { path: `dockerode-util-${args.path}`, namespace: 'hintbox-unused' }
        : undefined,
    );
    b.onResolve({ filter: /^\.\/ssh$/ }, (args) =>
      args.importer.includes('/docker-modem/') ? { path: 'docker-modem-ssh', namespace: 'hintbox-unused' } : undefined,
    );
    b.onResolve({ filter: /^(\.\/gen\/index\.js|node-fetch)$/ }, (args) =>
      args.importer.endsWith('/@kubernetes/client-node/dist/config.js')
        ? { path: `client-node-config-${args.path.replace(/\W+/g, '-')}`, namespace: 'hintbox-unused' }
        : undefined,
    );
    b.onResolve({ filter: /\/locales\/index\.js$/ }, (args) =>
      args.importer.includes('/zod/v4/')
        ? { path: path.join(path.dirname(args.importer), args.path), namespace: 'hintbox-zod-locales' }
        : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: 'hintbox-zod-locales' }, (args) => ({
      contents: `export { default as en } from ${JSON.stringify(path.join(path.dirname(args.path), 'en.js'))};`,
      loader: 'js',
      resolveDir: path.dirname(args.path),
    }));
    // The SDK's Client and Server each build an Ajv instance with its formats when constructed
    // (`new AjvJsonSchemaValidator()`), whether or not a schema is ever validated: ajv's modules
    // evaluated, two instances and their format tables, at every start of `hintbox run`, which
    // validates nothing on its hot path (it relays calls; the SDK's Server validates an
    // elicitation's answer against its requested schema, the Client a tool's structured output
    // after listTools). The SDK's imports of its ajv provider get this class instead: the same
    // constructor and getValidator, and the real provider (an ES module, so bundled behind a
    // lazy init) is evaluated and its Ajv built on the first getValidator, with the Ajv the
    // caller passed, if any. What is validated, and how, is unchanged.
    b.onResolve({ filter: /\/validation\/ajv-provider\.js$/ }, (args) =>
      args.namespace !== 'hintbox-lazy-ajv' && args.importer.includes('/@modelcontextprotocol/sdk/')
        ? { path: path.join(path.dirname(args.importer), args.path), namespace: 'hintbox-lazy-ajv' }
        : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: 'hintbox-lazy-ajv' }, (args) => ({
      contents: `export class AjvJsonSchemaValidator {
  constructor(ajv) { this._ajv = ajv; this._real = undefined; }
  getValidator(schema) {
    if (this._real === undefined) {
      const { AjvJsonSchemaValidator: Real } = require(${JSON.stringify(args.path)});
      this._real = new Real(this._ajv);
    }
    return this._real.getValidator(schema);
  }
}`,
      loader: 'js',
      resolveDir: path.dirname(args.path),
    }));
    // Node built-ins that `hintbox run` would load only for docker-modem and debug, made lazy
    // (each is a few hundred KB resident once loaded): docker-modem's https (and with it tls),
    // used only for a tcp:// DOCKER_HOST with TLS — the module object is the prototype of its
    // https wrapper, and only `.request` of it is called, so a proxy that loads https at the
    // first look-up stands in; and the tty of debug and of supports-color (which debug loads),
    // used only for `tty.isatty(1 or 2)` when they load and when a debug logger is made
    // (docker-modem makes one at load): for stdout and stderr that is what
    // `process.stdout.isTTY` / `process.stderr.isTTY` say (Node makes them tty.WriteStreams by
    // the same libuv handle test as isatty), read without loading tty; any other fd asks tty.
    b.onResolve({ filter: /^https$/ }, (args) =>
      args.importer.endsWith('/docker-modem/lib/http.js')
        ? { path: 'https', namespace: 'hintbox-lazy-builtin' }
        : undefined,
    );
    b.onResolve({ filter: /^tty$/ }, (args) =>
      args.importer.endsWith('/debug/src/node.js') || args.importer.endsWith('/supports-color/index.js')
        ? { path: 'tty', namespace: 'hintbox-lazy-builtin' }
        : undefined,
    );
    b.onLoad({ filter: /^https$/, namespace: 'hintbox-lazy-builtin' }, () => ({
      contents: `let real;
const load = () => (real ??= require('node:https'));
module.exports = new Proxy({}, {
  get: (_, key) => Reflect.get(load(), key),
  has: (_, key) => Reflect.has(load(), key),
});`,
      loader: 'js',
    }));
    b.onLoad({ filter: /^tty$/, namespace: 'hintbox-lazy-builtin' }, () => ({
      contents: `exports.isatty = (fd) =>
  fd === 1 ? process.stdout.isTTY === true : fd === 2 ? process.stderr.isTTY === true : require('node:tty').isatty(fd);`,
      loader: 'js',
    }));
    b.onLoad({ filter: /.*/, namespace: 'hintbox-unused' }, (args) => ({
      contents: `module.exports = function () { throw new Error(${JSON.stringify(
        `${args.path} is not included in the hintbox CLI bundle`,
      )}); };`,
      loader: 'js',
    }));
  },
};

// Chunks of an earlier build would stay beside the new ones: their names carry a hash. So would
// the entry's licence file of a build that had its legal comments there (they are in chunks now).
rmSync('dist/chunks', { recursive: true, force: true });
rmSync('dist/hintbox.mjs.LEGAL.txt', { force: true });
await build({
  entryPoints: { hintbox: 'src/cli/main.ts' },
  outdir: 'dist',
  splitting: true,
  outExtension: { '.js': '.mjs' },
  chunkNames: 'chunks/[name]-[hash]',
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'esm',
  sourcemap: 'linked',
  minify: true,
  legalComments: 'linked',
  banner: {
    // Bundled CommonJS dependencies call require(); give them one.
    js: "import { createRequire as __hintboxCreateRequire } from 'node:module'; const require = __hintboxCreateRequire(import.meta.url);",
  },
  plugins: [unused],
  logLevel: 'warning',
});
