import path from 'node:path';
import { z } from 'zod';
import { SENSITIVE_NAMES } from './sensitive-paths.js';
import { DatabaseSectionSchema } from './database-profile-schema.js';
import { formatEgressHost, parseEgressHost } from '../policy/egress-hosts.js';
import { NPM_SPEC, PYPI_SPEC } from '../packages/package-source.js';

/**
 * The operator's profile for one MCP server, as written in `profiles/*.yaml`.
 *
 * The profile is trusted: it sets the ceiling of what the server may ever get (paths, network,
 * resources). The server's tool annotations only pick a part of that ceiling per tool.
 * Every object is strict: an unknown key is an error, never silently ignored.
 */

/** Annotation overrides written by the operator; they replace the server's claim field by field. */
export const HintOverridesSchema = z.strictObject({
  readOnlyHint: z.boolean().optional(),
  destructiveHint: z.boolean().optional(),
  idempotentHint: z.boolean().optional(),
  openWorldHint: z.boolean().optional(),
});
export type HintOverrides = z.infer<typeof HintOverridesSchema>;

const NAME = /^[a-z0-9][a-z0-9_.-]{0,62}$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Docker-style sizes: 512m, 1g, 65536k, or bytes. */
const SIZE = /^(\d+)([bkmg])?$/i;

/** A mount's optional `name`: what `${sandbox:mount.<name>}` calls its target (sandbox-values.ts). */
export const MOUNT_NAME = /^[a-z0-9][a-z0-9_-]{0,62}$/;

export const MountSchema = z.strictObject({
  /**
   * A name for the mount, so that `server.args` and `env` can give the server its target as
   * `${sandbox:mount.<name>}` instead of repeating it. Lower case, digits, `_` and `-`.
   */
  name: z.string().regex(MOUNT_NAME, 'expected lower case letters, digits, _ and - (such as workspace)').optional(),
  /** Host path. Relative paths are resolved against the profile's folder, then with realpath. */
  source: z.string().min(1),
  /** Absolute path inside the container. */
  target: z
    .string()
    .regex(/^\/[^\0]*$/, 'expected an absolute container path')
    .refine((p) => normalizeContainerPath(p) !== '/', 'expected a path other than /'),
  /**
   * The most this mount may ever be: `rw` (default) lets tools that are not read-only write;
   * `ro` keeps it read-only for every tool.
   */
  mode: z.enum(['ro', 'rw']).default('rw'),
  /**
   * Allow Unix sockets, FIFOs and device nodes in the source. Default false: `plan` and `run`
   * refuse a source that holds one, since a sandbox can connect to a socket even through a
   * read-only mount and without network.
   */
  allowSpecialFiles: z.boolean().optional(),
  /**
   * The sensitive places (sensitive-paths.ts) this mount may hold, each by its name: a shell
   * start-up file (`.bashrc`), a credential store (`.config/gh`), an agent socket
   * (`SSH_AUTH_SOCK`). Exactly those the source is, lies in or contains; no pattern, no "all".
   * Default none: such a source is refused. `hintbox plan` shows the names.
   */
  allowSensitive: z
    .array(
      z.enum(SENSITIVE_NAMES, {
        error: `expected one of ${SENSITIVE_NAMES.join(', ')}`,
      }),
    )
    .min(1, 'expected at least one name (leave the field out for none)')
    .refine((names) => new Set(names).size === names.length, 'expected each name once')
    .optional(),
});

export const LimitsSchema = z.strictObject({
  /** Memory limit (swap is set equal, so no extra swap). Default 512m. */
  memory: z.string().regex(SIZE, 'expected a size such as 512m or 1g').default('512m'),
  /** CPU limit in cores. Default 1. */
  cpus: z.number().positive().max(64).default(1),
  /** Process limit. Default 256. */
  pids: z.number().int().min(8).max(65536).default(256),
  /** Size of the /tmp and HOME tmpfs in each sandbox. Default 64m. */
  tmpfs: z.string().regex(SIZE, 'expected a size such as 64m').default('64m'),
});

export const ToolRuleSchema = z.strictObject({
  /** Operator's annotations for this tool; they replace the server's claims field by field. */
  annotations: HintOverridesSchema.optional(),
  tags: z.array(z.string().min(1)).default([]),
  /**
   * Operator's approval rule: `confirm` (always ask), `deny` (never run), `allow` (run without
   * asking: honoured only for a trusted server; it never removes friction from an untrusted one).
   */
  approval: z.enum(['confirm', 'deny', 'allow']).optional(),
});

/** A regular expression, checked when the profile loads. */
const RegexSource = z.string().refine((source) => {
  try {
    new RegExp(source, 'u');
    return true;
  } catch {
    return false;
  }
}, 'expected a valid regular expression');

/**
 * A path argument's rule: the value must be an absolute path strictly inside this folder (as
 * the server resolves it: normalised, and no `..` segment at all).
 */
export const PathRuleSchema = z.strictObject({
  under: z.string().regex(/^\/[^\0]*$/, 'expected an absolute path (the folder as the server sees it)'),
});

/**
 * A pre-approval for unattended use: calls of `tool` whose arguments match run without asking
 * (each use is logged as such). Every listed argument must be present and match its rule: a
 * regular expression matches the whole raw text of the value (a string, or the JSON of any
 * other value) — it says nothing of where a path leads, and never matches a value with a `..`
 * path segment —; `{ under: /folder }` matches only a path inside that folder.
 */
export const PreApprovalSchema = z.strictObject({
  tool: z.string().min(1),
  arguments: z
    .record(
      z.string(),
      z.union([RegexSource, PathRuleSchema], { error: 'expected a regular expression or { under: <folder> }' }),
    )
    .default({}),
});

export const ApprovalSettingsSchema = z.strictObject({
  /** Seconds to wait for a person's answer; no answer is a denial. Default 120. */
  timeout: z.number().positive().max(86_400).default(120),
  /**
   * Start hintbox's console (a local web page for confirmations, the audit trail and tool
   * definitions) with this server, as `--console` does. Default false.
   */
  console: z.boolean().default(false),
});

export const ServerSchema = z
  .strictObject({
    /**
     * Image to run. With `npm` or `pypi`: the name hintbox tags the image it builds (default
     * `hintbox/npm.<package>:<version>` or `hintbox/pypi.<package>:<version>`).
     */
    image: z.string().min(1).optional(),
    /**
     * Folder with a Dockerfile that builds `image` (relative to the profile). Its `BASE_IMAGE`
     * and `NODE_SERVER_IMAGE` build args are set by hintbox. A `package.json` in it is installed
     * on the host with npm and the result copied in as `node_modules/`.
     */
    build: z.string().min(1).optional(),
    /**
     * An npm package to run (`@scope/name@1.2.3`), built by hintbox onto its Node base: resolved
     * and installed on the host, pinned by `<profile>.npm-lock.json` beside the profile.
     */
    npm: z.string().regex(NPM_SPEC, 'expected an npm package such as @scope/name@1.2.3').optional(),
    /**
     * A PyPI package to run (`name==1.2.3`), built by hintbox onto its Python base: wheels
     * resolved and installed on the host, pinned with hashes by `<profile>.pip-lock.txt`.
     */
    pypi: z.string().regex(PYPI_SPEC, 'expected a PyPI requirement such as name==1.2.3').optional(),
    /**
     * Which of the package's commands to run (npm `bin`, PyPI console script). Default: the only
     * one, or the one named like the package.
     */
    bin: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, 'expected a command name')
      .optional(),
    /**
     * Debian packages the image of an npm package needs besides Node (e.g. `chromium` for a
     * browser server), installed from Debian's archive inside the build, as root, before the
     * server's files are copied in. Only with `npm`. Default: none.
     */
    debian: z
      .array(z.string().regex(/^[a-z0-9][a-z0-9+.-]+$/, 'expected a Debian package name such as chromium'))
      .optional(),
    /** Entrypoint override. Default: the image's. */
    command: z.array(z.string()).optional(),
    /** Arguments (the container's CMD). Default: the image's. */
    args: z.array(z.string()).optional(),
    /**
     * uid:gid to run as; never 0. Default: the uid:gid of the hintbox process, so the server can
     * use the operator's files as the operator could; when hintbox runs as root, the owner of the
     * read-write mount sources (one non-root owner), else 10001:10001 (see sandbox/mount-owners.ts).
     */
    user: z
      .string()
      .regex(/^\d+(:\d+)?$/, 'expected a numeric uid or uid:gid')
      .refine((u) => !/^0+(:|$)/.test(u) && !/:0+$/.test(u), 'expected a non-root uid and gid (not 0)')
      .optional(),
    /** Working directory in the container. Default: the sandbox HOME (a tmpfs). */
    workdir: z.string().regex(/^\//, 'expected an absolute container path').optional(),
  })
  .superRefine((server, ctx) => {
    const sources = (['npm', 'pypi'] as const).filter((key) => server[key] !== undefined);
    if (sources.length > 1) {
      ctx.addIssue({ code: 'custom', path: ['pypi'], message: 'expected one of npm or pypi, not both' });
    } else if (sources.length === 1 && server.build !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['build'], message: `not with ${sources[0]}: hintbox builds the image` });
    } else if (sources.length === 0 && server.image === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['image'],
        message: 'expected an image, or a package to run (npm or pypi)',
      });
    }
    if (server.debian !== undefined && server.npm === undefined) {
      ctx.addIssue({ code: 'custom', path: ['debian'], message: 'only with npm (else: a Dockerfile of your own)' });
    }
    if (sources.length === 0 && server.bin !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['bin'], message: 'only with npm or pypi (else: command)' });
    }
  });

/** `host:port` of a host the server may reach through hintbox's egress proxy; written back lower-case. */
const EgressHostSchema = z.string().transform((entry, ctx) => {
  const parsed = parseEgressHost(entry);
  if ('error' in parsed) {
    ctx.addIssue({ code: 'custom', message: parsed.error });
    return z.NEVER;
  }
  return formatEgressHost(parsed);
});

/**
 * Network by host name: sandboxes that get it sit on an engine network with no route out, and
 * reach only these `host:port` entries through hintbox's egress proxy (one per session and class).
 */
export const NetworkHostsSchema = z
  .strictObject({
    /** What open-world tools may reach, besides `backend`. */
    allow: z.array(EgressHostSchema).default([]),
    /** The server's own backend: every tool may reach it; closed-world tools (openWorldHint: false) nothing else. */
    backend: z.array(EgressHostSchema).default([]),
  })
  .refine((n) => n.allow.length + n.backend.length > 0, 'expected at least one host in allow or backend (else: none)');

export type NetworkHosts = z.infer<typeof NetworkHostsSchema>;

/** `none` (default), `open`, or hosts by name; a problem inside the hosts form is named by its own path. */
const NetworkSchema = z.unknown().transform((value, ctx): 'none' | 'open' | NetworkHosts => {
  if (value === undefined || value === 'none' || value === 'open') return value ?? 'none';
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
    const parsed = NetworkHostsSchema.safeParse(value);
    if (parsed.success) return parsed.data;
    for (const issue of parsed.error.issues) ctx.addIssue(issue as Parameters<typeof ctx.addIssue>[0]);
    return z.NEVER;
  }
  ctx.addIssue({
    code: 'custom',
    message: 'expected none, open, or { allow: [host:port, …], backend: [host:port, …] }',
  });
  return z.NEVER;
});

export const TimeoutsSchema = z.strictObject({
  /** Seconds to wait for a sandbox's server to answer `initialize`. Default 30. */
  start: z.number().positive().default(30),
  /**
   * Seconds a tool call (or a forwarded read) may take from when it is forwarded: a hard ceiling
   * that progress notifications do not extend; then it is cancelled toward the server and the
   * client gets a RequestTimeout error; a call's sandbox is stopped (or, with other calls still
   * in it, frozen once the last one ends). Default 600.
   */
  call: z.number().positive().default(600),
});

export const ProfileSchema = z.strictObject({
  /** Server name: labels, container names, logs. */
  name: z
    .string()
    .regex(NAME, 'expected lower-case letters, digits, ".", "_" or "-" (at most 63)')
    // A server's own elicitations reach the client under its name; hintbox's under its own.
    .refine((name) => name !== 'hintbox', '"hintbox" is reserved: it names hintbox\'s own confirmations'),
  server: ServerSchema,
  /** Operator's judgement of the server; never taken from the server. Default untrusted. */
  trust: z.enum(['trusted', 'untrusted']).default('untrusted'),
  /** The most the server may see of the host's files. */
  mounts: z.array(MountSchema).default([]),
  /**
   * Network ceiling: `none` (default); `open` (out through the host, unfiltered: only
   * open-world tools get it); or hosts by name, `{ allow: [host:port…], backend: [host:port…] }`:
   * open-world tools reach `allow` and `backend`, closed-world ones only `backend`, through
   * hintbox's egress proxy, and nothing else.
   */
  network: NetworkSchema.default('none'),
  /** Environment of every sandbox: exactly these, nothing inherited from the host. */
  env: z.record(z.string().regex(ENV_NAME, 'expected an environment variable name'), z.string()).default({}),
  limits: LimitsSchema.default({ memory: '512m', cpus: 1, pids: 256, tmpfs: '64m' }),
  timeouts: TimeoutsSchema.default({ start: 30, call: 600 }),
  /** Per-tool operator rules, by tool name. */
  tools: z.record(z.string().min(1), ToolRuleSchema).default({}),
  /** Tags for every tool of this server. */
  tags: z.array(z.string().min(1)).default([]),
  /** Calls that run without asking (unattended use). */
  preApprove: z.array(PreApprovalSchema).default([]),
  approval: ApprovalSettingsSchema.default({ timeout: 120, console: false }),
  /**
   * May the server's tools be split over several sandboxes? Set false for servers that keep
   * state in process memory across tools; the one sandbox then gets the union of rights.
   */
  split: z.boolean().default(true),
  /**
   * Hold sandboxes that can change something (a writable mount, a network, a database role
   * above read) so that their server code runs only while a call allowed into them is in
   * flight: at the gate until the first such call, frozen between calls. Default true; only a
   * trusted server may be let run free (`false`).
   */
  hold: z.boolean().default(true),
  /**
   * Under `hintbox serve`: whether the server's clients share one set of its sandboxes
   * (`shared`, default: one server process per class, whoever calls) or each client gets its own
   * (`separate`: for a server that keeps a client's state in memory, or whose clients must not
   * meet in it). `hintbox run` serves one client either way.
   */
  clients: z.enum(['shared', 'separate'], { error: 'expected shared or separate' }).default('shared'),
  /**
   * What `tools/list` tells the client of each tool's hints. `enforced` (default): the hints its
   * sandbox makes true, and the spec's worst case for the others (`readOnlyHint: false`,
   * `destructiveHint: true`, `openWorldHint: true`; `idempotentHint` as given). `claimed`: the
   * server's annotations as it sent them, for clients that must see those. Either way each
   * tool's `_meta["io.hintbox/enforced"]` says what holds and why.
   */
  annotations: z.enum(['enforced', 'claimed'], { error: 'expected enforced or claimed' }).default('enforced'),
  /**
   * What the server may ask of the client: `sampling` (a completion of the client's model),
   * `elicitation` (a question to the person in a form, shown as the server's),
   * `urlElicitation` (a link for the person to open: it can carry what the server read out of
   * its sandbox, past `network: none`), `roots` (answered by hintbox with the sandboxes' mount
   * targets, never the client's host paths). Default: elicitation and roots yes; sampling and
   * URL elicitation only for a trusted server (and never once it broke a hint).
   */
  serverRequests: z
    .strictObject({
      sampling: z.boolean().optional(),
      elicitation: z.boolean().default(true),
      urlElicitation: z.boolean().optional(),
      roots: z.boolean().default(true),
    })
    .default({ elicitation: true, roots: true }),
  /**
   * The Postgres database the server may use, and the most it may do there (`read`, `append`,
   * `write`). Each sandbox gets a role of its own whose grants follow its tools' hints.
   */
  database: DatabaseSectionSchema.optional(),
});

export type ParsedProfile = z.infer<typeof ProfileSchema>;

/** Parses a size such as `512m` into bytes. The input has passed the schema's SIZE check. */
export function parseSize(size: string): number {
  const match = SIZE.exec(size);
  if (!match) throw new Error(`not a size: ${size}`);
  const unit = (match[2] ?? 'b').toLowerCase();
  const factor = { b: 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[unit] ?? 1;
  return Number(match[1]) * factor;
}

/** The uid the sandboxes run as when hintbox itself runs as root. */
export const FALLBACK_SANDBOX_USER = '10001:10001';

/** The sandbox user: the profile's, else the caller's uid:gid, never root. Pure. */
export function sandboxUser(configured: string | undefined, uid: number | undefined, gid: number | undefined): string {
  // Defence in depth behind the schema: a root user never reaches a container.
  if (configured && !/^0+(:|$)/.test(configured) && !/:0+$/.test(configured)) return configured;
  if (uid === undefined || uid === 0) return FALLBACK_SANDBOX_USER;
  return `${uid}:${gid ?? uid}`;
}

/** `/d/`, `//d` and `/d/.` are all `/d`. Pure. */
export function normalizeContainerPath(p: string): string {
  const normalized = path.posix.normalize(p);
  return normalized.length > 1 ? normalized.replace(/\/+$/, '') : normalized;
}
