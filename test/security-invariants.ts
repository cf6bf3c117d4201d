/**
 * hintbox's security promises, each with the tests that prove it. Each of those tests says so
 * in its own file, on the line right above its `it(…)`:
 *
 *     // proves: APPROVAL-UNTRUSTED
 *     it('never runs a call of an untrusted server', () => { … });
 *
 * (several ids separated by commas), so that reading a test tells which promise it keeps. The
 * unit test `security-invariants.test.ts` checks both ways: an invariant without a test, or
 * naming a test that does not exist or does not say it proves it, fails; so does a test that
 * says it proves an invariant that does not list it. Add the invariant first, then its test.
 * Scripts read this array (docs/security.md is made from it): keep its fields `id`, `statement`, `tests`.
 */
/** A `// proves: ID[, ID…]` line above a test (see above); the ids are its first group. */
export const PROVES_COMMENT = /^\/\/ proves: (\S.*)$/;

export interface SecurityInvariant {
  id: string;
  /** One sentence, as a user could check it. */
  statement: string;
  /** `file` (under test/) and the exact title passed to `it(…)` there. */
  tests: { file: string; title: string }[];
}

export const SECURITY_INVARIANTS: SecurityInvariant[] = [
  {
    id: 'APPROVAL-UNTRUSTED',
    statement:
      "An untrusted server's calls always need a person's confirmation (asked per call, or the person's own standing answer for that exact definition, STANDING-ANSWERS); no annotation, rule or pre-approval removes it, and a call nobody approves does not run.",
    tests: [
      { file: 'unit/approval-decision.test.ts', title: 'never runs a call of an untrusted server' },
      {
        file: 'unit/approval-decision.test.ts',
        title: 'never lets a rule or a pre-approval remove friction for an untrusted server',
      },
      {
        file: 'integration/approval.test.ts',
        title: "hides and blocks an untrusted server's tools until they are approved",
      },
    ],
  },
  {
    id: 'LIES-RECORDED',
    statement:
      'A read-only tool caught writing (EROFS) is recorded as a hint violation in the audit trail, and its server is treated as untrusted for the rest of the session.',
    tests: [
      {
        file: 'integration/approval.test.ts',
        title:
          'records a read-only tool caught writing (EROFS) as a hint violation, and distrusts the server from then on',
      },
    ],
  },
  {
    id: 'PINS',
    statement:
      'A tool whose definition differs from the one approved in the lock file is hidden and refused, naming what changed, until approved again — unless the change only narrows its hints, which is served in the stricter sandbox and audited; a run never writes the lock file.',
    tests: [
      {
        file: 'unit/approval-decision.test.ts',
        title: 'blocks every tool whose definition changed, whatever the trust and the rules',
      },
      { file: 'unit/fuzz-lock-file.test.ts', title: 'never takes an approved definition edited without its hash' },
      {
        file: 'integration/approval.test.ts',
        title: 'blocks a tool whose description changed, names the change, and serves it again once re-approved',
      },
      {
        file: 'unit/call-guard.test.ts',
        title: 'names the changed fields in its refusal, never the new text (it may be a prompt injection)',
      },
      {
        file: 'integration/cold-start.test.ts',
        title:
          'never shows the changed text of a server that changed since approved; a call made meanwhile is refused and never reaches it',
      },
      {
        file: 'integration/approval.test.ts',
        title:
          'serves a tool whose hints only narrowed without a person, in the stricter sandbox, and audits it (the lock file is not written)',
      },
      {
        file: 'unit/lock-file.test.ts',
        title: 'refuses no change, a wider hint, idempotentHint, and a narrowing together with any other change',
      },
      {
        file: 'unit/lock-file.test.ts',
        title: 'hides any other change (a wider hint, a new description) and an unapproved tool of an untrusted server',
      },
      {
        file: 'unit/call-guard.test.ts',
        title:
          'reads the lock file again when a blocked tool is called, and serves it once the same definition is approved',
      },
      {
        file: 'unit/lock-file.test.ts',
        title: 'blocks every tool, whatever the trust, when the lock file cannot be read; logs and audits it',
      },
      {
        file: 'integration/approval.test.ts',
        title:
          'hides every tool when the lock file cannot be read at a re-listing (fail closed), audits it, and serves an approved tool again once it reads',
      },
    ],
  },
  {
    id: 'AUDIT',
    statement:
      'Every call is recorded in the audit log before it is forwarded and its outcome after, with its full arguments; a crash in between leaves an intent that says so; a call whose intent cannot be appended is refused.',
    tests: [
      {
        file: 'unit/audit-log.test.ts',
        title: 'writes intents and outcomes as chained lines that verify; the folder and files are owner-only',
      },
      {
        file: 'unit/audit-log.test.ts',
        title: 'fails closed: an intent that cannot be appended throws, and the call guard refuses the call',
      },
      {
        file: 'integration/approval.test.ts',
        title: 'records a call whose sandbox is killed in the middle as sandbox-died',
      },
      { file: 'integration/audit-crash.test.ts', title: 'every call the server received has its intent in the log' },
      {
        file: 'integration/audit-disk-full.test.ts',
        title: 'is kept and written once the disk has room again, into a new file linked past the torn line',
      },
    ],
  },
  {
    id: 'AUDIT-CHAIN',
    statement:
      'A line of the audit log changed, removed, inserted or moved, or a file missing from the middle or start of a chain, makes `hintbox audit verify` fail, naming where.',
    tests: [
      { file: 'unit/audit-log.test.ts', title: 'a changed line: the line after it breaks' },
      { file: 'unit/audit-log.test.ts', title: 'a removed line, two lines swapped, a line added' },
      { file: 'unit/audit-log.test.ts', title: 'a file removed from the middle or the start of a chain' },
      {
        file: 'unit/audit-log.test.ts',
        title: 'a whole last line cut short (its newline gone) is a break where the next file links to it',
      },
      { file: 'integration/audit-crash.test.ts', title: 'audit verify passes on the log of the killed run' },
      {
        file: 'integration/audit-crash.test.ts',
        title: 'audit verify fails, naming the line, when one line of that log is edited',
      },
    ],
  },
  {
    id: 'AUDIT-NO-WEDGE',
    statement:
      'No single record can stop the audit trail: any text a server makes is kept up to 8 KiB, with the size and SHA-256 of the whole; the log is appended in the calling process (no store to refuse a record), and a Postgres sink that fails only falls behind.',
    tests: [
      {
        file: 'integration/server-text.test.ts',
        title: 'keeps the audit trail going after a 40 MB error answer, storing its size and SHA-256, not the whole',
      },
      {
        file: 'unit/audit-stored-text.test.ts',
        title: 'keeps at most 8 KiB of a 40 MB error message: its beginning, its size and the SHA-256 of the whole',
      },
      {
        file: 'unit/audit-stored-text.test.ts',
        title: 'caps every text of a record (events too), and keeps NUL and lone surrogates as JSON escapes',
      },
      {
        file: 'integration/audit-sink.test.ts',
        title: 'falls behind while the database is down without slowing the log, and catches up once it is back',
      },
    ],
  },
  {
    id: 'SERVER-TEXT',
    statement:
      "Server-made text never acts on a person's screen or passes for hintbox's own: tools whose names break the spec's rule are left out, and every server string shown in a confirmation, `approve`, `audit`, `plan` or the log has its control characters, line and paragraph separators, bidi controls and invisible characters escaped.",
    tests: [
      {
        file: 'integration/server-text.test.ts',
        title: 'leaves out tools whose names break the spec, and shows no server text raw in approve or plan',
      },
      {
        file: 'integration/server-text.test.ts',
        title: 'lets no tool name forge a line of a confirmation or of hintbox audit',
      },
      {
        file: 'unit/discover-tools.test.ts',
        title: "leaves out tools whose names break the spec's rule (1-128 characters of A-Za-z0-9_-.)",
      },
      {
        file: 'unit/render-server-text.test.ts',
        title: 'shows every control, separator, bidi and invisible character as an escape, never raw',
      },
      {
        file: 'unit/call-guard-preview.test.ts',
        title: 'fences every line a reader sees: a U+2028, U+2029 or CR in a previewed file name starts none',
      },
      {
        file: 'integration/server-text.test.ts',
        title: 'fences every line of a preview: a U+2028 in a previewed file name starts no line of its own',
      },
      {
        file: 'unit/audit-stored-text.test.ts',
        title: 'shows each record on one line, whatever its server-made text holds',
      },
      {
        file: 'unit/logger.test.ts',
        title: 'keeps server text in a JSON line from making lines, moving the cursor or reordering what is read',
      },
    ],
  },
  {
    id: 'METRICS-ACCESS',
    statement:
      "With bearer tokens, `hintbox serve`'s /metrics (servers, tools, outcomes) is read only with a token the tokens file allows it (`metrics: true` or `only`), under OAuth only from this machine, and each refusal is audited; metric labels hold no more tool names than the lock files pin plus a bound per server.",
    tests: [
      {
        file: 'unit/bearer-tokens.test.ts',
        title: 'lets only a token with metrics (true, or only: no server) read /metrics',
      },
      {
        file: 'unit/serve-metrics.test.ts',
        title: 'lets only a metrics token read them; each refusal is audited and counted',
      },
      {
        file: 'unit/serve-metrics.test.ts',
        title: 'under an authenticator without a grant for metrics (OAuth): a client on this machine only',
      },
      {
        file: 'unit/audit-metrics.test.ts',
        title: 'labels pinned tools by name, at most N other names per server, and the rest as other',
      },
      {
        file: 'integration/serve.test.ts',
        title: 'counts on /metrics exactly the calls made, a declined one and the denials; logs JSON lines',
      },
    ],
  },
  {
    id: 'INSTRUCTIONS',
    statement:
      "A server's `initialize` instructions reach the client only as approved: locked by `hintbox approve` (which shows them), or as sent by a trusted server with none locked, and withheld while they differ from the locked ones or an untrusted server's were never approved.",
    tests: [
      {
        file: 'integration/server-text.test.ts',
        title: "withholds the server's instructions until approve shows and pins them, and again when they change",
      },
      {
        file: 'unit/approved-instructions.test.ts',
        title: "withholds an untrusted server's instructions until they are approved, and logs it without their text",
      },
      {
        file: 'unit/approved-instructions.test.ts',
        title: 'withholds instructions that differ from the locked ones, whatever the trust',
      },
    ],
  },
  {
    id: 'RO-MOUNTS',
    statement:
      'A tool whose effective readOnlyHint is true runs where every mount is read-only: its writes fail and the host files stay byte-identical.',
    tests: [
      {
        file: 'integration/lying-server.test.ts',
        title: 'cannot write to its read-only mount, and the file is byte-identical',
      },
      {
        file: 'integration/filesystem-server.test.ts',
        title: 'reads through its read-only sandbox, writes through its read-write one, and cleans up',
      },
      {
        file: 'integration/gallery.test.ts',
        title: 'git: status and log of a host repository answer from a read-only sandbox, and leave .git as it was',
      },
      {
        file: 'unit/plan-sandboxes.test.ts',
        title: 'a mixed ceiling (one ro, one rw mount) never makes the ro mount writable',
      },
    ],
  },
  {
    id: 'RO-ROOTFS',
    statement: "Every sandbox's root file system is read-only; only small size-limited tmpfs are writable.",
    tests: [
      { file: 'integration/lying-server.test.ts', title: 'cannot write to the root file system' },
      {
        file: 'unit/container-spec.test.ts',
        title: 'gives /tmp and HOME a sized tmpfs, HOME owned by the sandbox user',
      },
    ],
  },
  {
    id: 'CLOSED-WORLD',
    statement:
      'A tool whose effective openWorldHint is false has no network: it can neither connect to a canary nor resolve a name.',
    tests: [
      {
        file: 'integration/lying-server.test.ts',
        title: 'cannot reach a canary TCP server that an unannotated tool of the same server reaches',
      },
      { file: 'integration/lying-server.test.ts', title: 'cannot resolve a host name' },
      { file: 'unit/container-spec.test.ts', title: 'has no network at all when the grant has none' },
    ],
  },
  {
    id: 'EGRESS-HOSTS',
    statement:
      "With network hosts by name, a sandbox reaches only its class's host:port entries, through its egress proxy: not an unlisted host or port, not the engine's host or gateways, not a private or metadata address unless listed by address; a direct connection and DNS fail; each refusal is audited.",
    tests: [
      {
        file: 'integration/egress.test.ts',
        title: 'lets an open-world tool reach only listed hosts, through the proxy alone',
      },
    ],
  },
  {
    id: 'EGRESS-BACKEND',
    statement:
      "A closed-world tool of a server with hosts by name reaches only the server's backend; asking for another host is a hint violation that makes the server untrusted.",
    tests: [
      {
        file: 'integration/egress.test.ts',
        title: "lets a closed-world tool reach the server's backend and nothing else; trying is a hint violation",
      },
    ],
  },
  {
    id: 'CEILING',
    statement:
      "Hints only narrow the profile's ceiling: no hint, override or missing annotation gets a tool more than the profile grants.",
    tests: [
      {
        file: 'integration/lying-server.test.ts',
        title: 'gives a tool without annotations exactly the ceiling: it may write the mount',
      },
      { file: 'integration/lying-server.test.ts', title: 'gives an unannotated tool no network either' },
      { file: 'unit/plan-sandboxes.test.ts', title: 'an override cannot widen past the ceiling' },
    ],
  },
  {
    id: 'NO-ROOT',
    statement: 'Sandboxes never run as uid 0 or gid 0, have no effective capabilities, and cannot gain privileges.',
    tests: [
      {
        file: 'integration/lying-server.test.ts',
        title: 'runs as a non-root user with no effective capabilities and no new privileges',
      },
      {
        file: 'unit/container-spec.test.ts',
        title: 'refuses a root user even when given one directly (defense in depth behind the schema)',
      },
      { file: 'unit/profile.test.ts', title: 'a root or non-numeric user' },
      {
        file: 'unit/mount-owners.test.ts',
        title: 'as root, falls back to 10001 for a root owner, two owners or none',
      },
    ],
  },
  {
    id: 'LIMITS',
    statement:
      'Pids, memory (no extra swap) and CPU are limited; a fork bomb is stopped and the host stays responsive.',
    tests: [
      {
        file: 'integration/lying-server.test.ts',
        title: 'is stopped by the pids limit when it forks without end, and the test process stays responsive',
      },
      { file: 'unit/container-spec.test.ts', title: 'takes pids, memory, swap and CPU limits from the profile' },
    ],
  },
  {
    id: 'HARDENING',
    statement:
      'Every sandbox drops all capabilities, sets no-new-privileges, runs an init, is never privileged and never gets the Docker socket.',
    tests: [
      { file: 'integration/lying-server.test.ts', title: 'hardens every sandbox container (inspect)' },
      { file: 'unit/container-spec.test.ts', title: 'hardens every sandbox class the same way' },
      { file: 'unit/container-spec.test.ts', title: 'has no Binds and never the Docker socket' },
    ],
  },
  {
    id: 'ENV',
    statement:
      "A server's environment is the profile's (plus HOME and TMPDIR, and the image's own ENV): nothing is inherited from the host, and nothing of hintbox's (the gate's token, socket and GLIBC_TUNABLES) reaches it; the profile's own GLIBC_TUNABLES does.",
    tests: [
      {
        file: 'unit/container-spec.test.ts',
        title: 'passes exactly the declared environment plus HOME and TMPDIR, nothing from the host',
      },
      {
        file: 'unit/container-spec.test.ts',
        title: "hands the profile's GLIBC_TUNABLES to the gate for the server, never to the gate itself",
      },
      {
        file: 'integration/escaper.test.ts',
        title: "passes the server only the profile's environment, HOME, TMPDIR and the image's own (no GLIBC_TUNABLES)",
      },
      { file: 'integration/escaper.test.ts', title: "keeps the profile's own GLIBC_TUNABLES for the server" },
    ],
  },
  {
    id: 'SANDBOX-VALUES',
    statement:
      "A profile's ${sandbox:NAME} (in server.args and env) is never taken from the host: it is filled in when the container is made, with that sandbox's own database role or the target of the profile's mount of that name (mount.<name>), and a reference made by a host value or $$ is refused.",
    tests: [
      {
        file: 'unit/interpolate.test.ts',
        title: 'is kept as written where allowed, and the host variables are never consulted for it',
      },
      {
        file: 'unit/interpolate.test.ts',
        title: 'is not the host variable of the same name, in process.env or in vars',
      },
      {
        file: 'unit/interpolate.test.ts',
        title: 'cannot be made by $$ or by a host value: a reference left in a string is one the profile wrote',
      },
      {
        file: 'unit/container-spec.test.ts',
        title: "fills ${sandbox:…} in the profile's args and env with this sandbox's own role values",
      },
      {
        file: 'unit/container-spec.test.ts',
        title: "fills ${sandbox:mount.NAME} with the mount's target, in args and env, without a database",
      },
    ],
  },
  {
    id: 'MOUNT-SOCKETS',
    statement:
      'plan and run refuse a mount source that holds a Unix socket, FIFO or device node (or that is too large or deep to check), unless the profile allows it for that mount: a read-only, network-less tool cannot reach a host service through its mount.',
    tests: [
      {
        file: 'unit/special-files.test.ts',
        title: 'finds a Unix socket deep in a source, and a FIFO; refuses them in one line each naming the field',
      },
      {
        file: 'unit/special-files.test.ts',
        title: 'does not follow symlinks, and refuses a source it cannot check within its limits',
      },
      {
        file: 'integration/escaper.test.ts',
        title:
          'refuses to run or plan over a read-only mount that holds a host socket, and the service never hears from the server',
      },
    ],
  },
  {
    id: 'PRE-APPROVE-PATHS',
    statement:
      'A pre-approval never runs a call whose path argument walks out of its folder: a path rule (under:) matches only normalised absolute paths strictly inside its folder, and no rule matches a value with a `..` path segment.',
    tests: [
      {
        file: 'unit/pre-approval.test.ts',
        title: 'a path rule (under:) matches only absolute paths strictly inside its folder, never one with ..',
      },
      {
        file: 'unit/pre-approval.test.ts',
        title: 'a regex rule matches raw text, but never a value with a .. path segment',
      },
      {
        file: 'integration/escaper.test.ts',
        title: 'does not let a regex rule for a folder pre-approve a path that walks out of it with ..',
      },
      {
        file: 'integration/escaper.test.ts',
        title: 'pre-approves by path only inside the folder (under:), and confirms a path that walks out of it',
      },
    ],
  },
  {
    id: 'PREVIEW-BOUNDED',
    statement:
      'A dry run cannot freeze hintbox through its preview: the diff work is bounded in time and size and done in slices between which hintbox keeps serving, and the confirmation says when the preview was cut.',
    tests: [
      {
        file: 'unit/preview-bounds.test.ts',
        title:
          'formats 2000 added files of 2000 lines within its limits, without stalling the event loop, and says it was cut',
      },
      {
        file: 'unit/preview-bounds.test.ts',
        title:
          'stops diffs that take long (many changed files) when its time is up, in slices the event loop runs between',
      },
      {
        file: 'integration/escaper.test.ts',
        title:
          'keeps hintbox responsive while it previews a dry run that leaves 2000 files, and says the preview was cut',
      },
    ],
  },
  {
    id: 'LOG-BOUNDED',
    statement:
      "A server that floods stderr cannot fill the host's disk: Docker's log of a sandbox is a rotated json-file of at most 2 × 1 MiB, and hintbox's own log takes at most 4 MiB of each sandbox's stderr.",
    tests: [
      {
        file: 'unit/container-spec.test.ts',
        title: "caps Docker's log of every sandbox (a rotated json-file), whatever the engine's default",
      },
      {
        file: 'integration/escaper.test.ts',
        title: "keeps Docker's log of a sandbox and hintbox's own log bounded when a read-only tool floods stderr",
      },
    ],
  },
  {
    id: 'DENYLIST',
    statement:
      "Host paths are resolved with realpath; the Docker socket, /proc, /sys, /dev, /etc, credentials folders, and anything containing them, are never mounted; shell start-up files, credential stores and agent sockets (~/.bashrc, ~/.config/gh, ~/.git-credentials, ~/.npmrc, SSH_AUTH_SOCK's socket, /run/user, …), and anything in or containing them, only by a mount whose allowSensitive names exactly each of them.",
    tests: [
      { file: 'unit/profile.test.ts', title: 'a mount source that is a symlink to /etc' },
      { file: 'unit/profile.test.ts', title: 'a mount source that is the home folder (it contains ~/.ssh)' },
      {
        file: 'unit/host-path-denylist.test.ts',
        title: 'refuses a denied path, anything inside one, and anything that contains one',
      },
      {
        file: 'unit/host-path-denylist.test.ts',
        title: 'each home entry is refused as the file itself and as its parent folder, unless the mount names it',
      },
      {
        file: 'unit/host-path-denylist.test.ts',
        title:
          'agent sockets: the socket SSH_AUTH_SOCK and GPG_AGENT_INFO point to, the runtime folders, and their parents',
      },
      {
        file: 'unit/host-path-denylist.test.ts',
        title: 'no blanket opt-in: an unknown name, a pattern, a name the mount does not hold, a repeat, an empty list',
      },
      {
        file: 'integration/import-hostile.test.ts',
        title:
          'plan without the variables is refused, one line naming each to set; with them set to ~/.bashrc and ~/.config/gh, the deny list refuses it',
      },
      {
        file: 'integration/import-hostile.test.ts',
        title:
          'with allowSensitive naming .bashrc and .config/gh, plan takes the mounts and prints the opt-in; the files stay byte-identical',
      },
    ],
  },
  {
    id: 'OPERATOR-OUT-OF-REACH',
    statement:
      "What the operator decides lies outside every mount a server may write: a profile whose file or build folder lies inside (or contains) a read-write mount source is refused, hintbox's own state folder and installation are never mounted, nor its temporary folder (what holds it, and its sandbox socket and preview folders).",
    tests: [
      { file: 'unit/profile.test.ts', title: 'refuses a profile that lies inside a mount its server may write' },
      {
        file: 'unit/profile.test.ts',
        title: 'refuses a profile reached through a symlink that lies inside a mount its server may write',
      },
      {
        file: 'unit/profile.test.ts',
        title: "refuses a writable mount that holds or lies inside the server's build folder",
      },
      {
        file: 'unit/profile.test.ts',
        title: "refuses to mount hintbox's own state folder or installation, even read-only",
      },
      {
        file: 'unit/profile.test.ts',
        title:
          "refuses to mount hintbox's temporary folder, what holds it, or a socket or preview folder in it; not the rest of it",
      },
      {
        file: 'integration/errors.test.ts',
        title: 'refuses a profile that its server could rewrite (inside a read-write mount), starting nothing',
      },
    ],
  },
  {
    id: 'NESTED-MOUNTS',
    statement:
      'A read-only source with mount points below it is refused on engines that cannot make read-only mounts recursive.',
    tests: [
      {
        file: 'integration/nested-mounts.test.ts',
        title: 'are refused on an engine that cannot make them read-only, before any container starts',
      },
    ],
  },
  {
    id: 'CLEANUP',
    statement:
      'No container of a session outlives it: removed on disconnect and on SIGTERM, swept after SIGKILL at the next start, live sessions untouched.',
    tests: [
      { file: 'integration/lying-server.test.ts', title: 'removes every container when the client disconnects' },
      { file: 'integration/lifecycle.test.ts', title: 'removes every container on SIGTERM' },
      {
        file: 'integration/lifecycle.test.ts',
        title: 'sweeps the containers of a run killed with SIGKILL at the next start, and leaves live sessions alone',
      },
    ],
  },
  {
    id: 'FAIL-CLOSED',
    statement: 'Bad input gets a one-line error naming what is wrong and a non-zero exit, and leaves nothing started.',
    tests: [
      {
        file: 'integration/errors.test.ts',
        title: 'rejects a bad profile with one line per problem and exit code 2, starting nothing',
      },
      {
        file: 'integration/errors.test.ts',
        title: 'shows the stderr tail of a server that fails initialize, and removes its container',
      },
      { file: 'integration/errors.test.ts', title: 'reports an image that is missing and cannot be built' },
      {
        file: 'unit/fuzz-profile.test.ts',
        title: 'returns a profile or throws one ProfileError of well-formed lines, quickly, whatever the text',
      },
      {
        file: 'unit/fuzz-lock-file.test.ts',
        title: 'returns a lock hashed right, or throws one LockFileError line naming the field, whatever the text',
      },
    ],
  },
  {
    id: 'STDIO',
    statement:
      "The server's stderr goes to hintbox's log, never into the MCP stream; tool definitions pass through as received; no message of a sandbox brings hintbox down (its sandboxes would run on).",
    tests: [
      {
        file: 'integration/lying-server.test.ts',
        title: "logs the server's stderr on hintbox's stderr, never in the MCP stream",
      },
      { file: 'unit/gateway.test.ts', title: 'lists the tool definitions exactly as received, unknown keys included' },
      {
        file: 'integration/server-text.test.ts',
        title:
          'stays up when a sandbox answers with JSON too deep to write again: the call gets an error, the next one runs',
      },
      {
        file: 'unit/fuzz-gateway.test.ts',
        title:
          'keeps every answer to its call, forwards nothing it should not, and never hangs, whatever both sides send',
      },
    ],
  },
  {
    id: 'GATE',
    statement:
      "Every sandbox starts with hintbox's own static gate, bound read-only: nothing of the image runs until hintbox releases it (not even its HEALTHCHECK), a sandbox removed unreleased never ran the server, and only the gate (by its token) is taken on the sandbox's socket.",
    tests: [
      {
        file: 'integration/gate.test.ts',
        title: 'runs nothing of the image until released, and a held sandbox removed never ran',
      },
      {
        file: 'integration/gate.test.ts',
        title: "does not let the image's HEALTHCHECK run code in a held sandbox",
      },
      {
        file: 'unit/gate.test.ts',
        title: 'refuses a dynamically linked executable: the image would run its own loader first',
      },
      {
        file: 'unit/gate.test.ts',
        title: "lets only the sandbox user in, takes the gate's two connections, then removes its folder",
      },
    ],
  },
  {
    id: 'EARLY-START',
    statement:
      "A sandbox started early, from the tools the same image listed before, runs nothing of the image until this start's tools plan it, and is removed unreleased when they do not.",
    tests: [
      {
        file: 'integration/filesystem-server.test.ts',
        title:
          "starts the sandboxes its tools planned last time in parallel with discovery, and removes an early one this start's tools do not plan",
      },
    ],
  },
  {
    id: 'HELD-UNTIL-CALLED',
    statement:
      'Server code runs with a grant that can change something (a writable mount, a network, a database role above read) only while a call allowed into that sandbox is in flight: held at its gate until the first, frozen between calls; only a trusted server may be let run free (hold: false).',
    tests: [
      {
        file: 'integration/held-sandbox.test.ts',
        title: 'runs no server code with a writable mount while every call into it is declined',
      },
      {
        file: 'integration/held-sandbox.test.ts',
        title: 'freezes a writing sandbox between calls: its server makes no progress without a call in flight',
      },
      {
        file: 'integration/held-sandbox.test.ts',
        title:
          'freezes every process a writing server started, in sessions of their own, forking, and waking the others',
      },
      {
        file: 'unit/sandbox-activity.test.ts',
        title: 'never leaves a call in a frozen sandbox when it enters while the freeze is under way',
      },
      {
        file: 'unit/sandbox-activity.test.ts',
        title: 'lets a call that comes in cancel the freeze under way, where the freezer can: no thaw to wait for',
      },
      {
        file: 'unit/sandbox-activity.test.ts',
        title: 'stops cancelling once the sandbox went unfrozen for the window: the next freeze is waited for',
      },
      {
        file: 'unit/cgroup-freezer.test.ts',
        title:
          'undoes a freeze still under way when cancelled (a call came in): thawed, resolves cancelled, never rejects',
      },
      {
        file: 'unit/sandbox-activity.test.ts',
        title:
          'freezes again when a call that cancelled the freeze leaves before its own step ran (cancelled by its client)',
      },
      {
        file: 'unit/sandbox-activity.test.ts',
        title:
          'runs a hold of its own queued behind a cancelled freeze frozen all the same, and the cancelling call after it',
      },
      {
        file: 'unit/sandbox-activity.test.ts',
        title: 'lets no call cancel a freeze once the window is over, at its very end included',
      },
      {
        file: 'unit/sandbox-activity.test.ts',
        title:
          'removes a sandbox whose freeze failed even when a call entered meanwhile, and refuses that call and every later one instead of sending them into a stopped sandbox',
      },
      {
        file: 'unit/sandbox-pool.test.ts',
        title:
          'never thaws a held sandbox for a listing, nor keeps it thawed: a call ending during the listing freezes it',
      },
      {
        file: 'unit/sandbox-activity.test.ts',
        title: 'reports a freeze that failed, so the sandbox can be removed (fail closed)',
      },
      {
        file: 'unit/sandbox-activity.test.ts',
        title:
          'removes a sandbox whose thaw failed after its call was sent ahead of the answer, and refuses every later call',
      },
      {
        file: 'integration/held-back-to-back.test.ts',
        title: 'leaves nothing running after back-to-back calls whose server keeps working past each answer',
      },
      {
        file: 'unit/gateway.test.ts',
        title:
          'sends neither the thaw nor a call that comes in while the freeze is unanswered, and never either when the gate answers F',
      },
      { file: 'unit/profile.test.ts', title: 'refuses hold: false for a server that is not trusted' },
      {
        file: 'unit/sandbox-activity.test.ts',
        title: "holds a sandbox frozen for hintbox's own work, calls in flight included, and lets no call in meanwhile",
      },
      {
        file: 'unit/sandbox-activity.test.ts',
        title: 'freezes a sandbox that ran free once it is held between calls (its server lost trust)',
      },
      {
        file: 'unit/gateway.test.ts',
        title: 'freezes a held sandbox that a call released even when the call is cancelled while the server starts',
      },
      {
        file: 'unit/gateway.test.ts',
        title: 'thaws a held sandbox before each call reaches it and freezes it when its last call ends',
      },
      {
        file: 'unit/gateway.test.ts',
        title: 'ignores a tool change a held sandbox announces outside a call, and never thaws it to list its tools',
      },
    ],
  },
  {
    id: 'HELD-WOKEN',
    statement:
      'A held sandbox frozen by the cgroup freezer (hintbox root on the host, Docker or rootful Podman) runs nothing while frozen, whatever wakes it (a POSIX timer or F_SETSIG sending SIGCONT, which the kernel delivers with nothing of the sandbox running): not one byte written, and it is not killed. One frozen by its gate (HINTBOX_FREEZER=gate, and wherever the cgroup freezer cannot be written) that runs all the same is caught by the gate within one watch period (a pass over /proc every 10 ms against the freeze): killed whole, removed, said in the log, audited as a hint violation, and its server untrusted for the rest of the session.',
    tests: [
      {
        file: 'integration/held-woken.test.ts',
        title:
          'writes nothing while frozen by the cgroup freezer, over calls that re-arm it, and is not killed (nothing ran)',
      },
      {
        file: 'integration/held-woken.test.ts',
        title:
          'frozen by its gate (HINTBOX_FREEZER=gate): is killed within the watch period of its first wake; its writes stop, its sandbox is gone, hintbox says why',
      },
      {
        file: 'unit/gate-control.test.ts',
        title:
          'takes B (the gate killed a sandbox that ran while frozen) as the end: every command fails, the listener hears it once',
      },
      {
        file: 'unit/cgroup-freezer.test.ts',
        title: 'refuses a cgroup that does not name the container: a reused pid, another PID namespace',
      },
      {
        file: 'unit/cgroup-freezer.test.ts',
        title: 'v2: writes 1 and fails when cgroup.events never says frozen 1 within the limit (a failed freeze)',
      },
    ],
  },
  {
    id: 'HELD-FROZEN-KILLED',
    statement:
      'A sandbox frozen by the cgroup freezer whose hintbox is killed (SIGKILL) stays frozen, running nothing, until the sweep (every start, or hintbox sweep) removes it.',
    tests: [
      {
        file: 'integration/held-frozen-crash.test.ts',
        title: 'stays frozen and writes nothing after hintbox is killed, and the sweep removes it',
      },
    ],
  },
  {
    id: 'HONEST-PLAN',
    statement: 'The plan marks every hint its sandbox does not make true (shared sandboxes, only-adds on files).',
    tests: [
      {
        file: 'unit/plan-sandboxes.test.ts',
        title: 'a read-only tool sharing with a writing tool is not enforced (readOnlyHint)',
      },
      {
        file: 'unit/plan-sandboxes.test.ts',
        title:
          'a closed-world tool sharing with an open-world tool under an open ceiling is not enforced (openWorldHint)',
      },
    ],
  },
  {
    id: 'DB-READ',
    statement:
      "A sandbox whose tools claim readOnlyHint connects to Postgres as a role of its own with SELECT only: writes, DDL, TEMP, sequences, files and SECURITY DEFINER calls fail and every table's checksum is unchanged, also when the server writes through its DATABASE_URL under hintbox run.",
    tests: [
      { file: 'integration/database-roles.test.ts', title: 'reads its schema' },
      {
        file: 'integration/database-roles.test.ts',
        title: 'is capped by the profile: asking for write under a read ceiling gives a read role',
      },
      {
        file: 'integration/database-roles.test.ts',
        title: 'refuses to create a role while those grants exist, naming each, and creates nothing',
      },
      {
        file: 'integration/database-stack.test.ts',
        title:
          'a read-only tool cannot write through its DATABASE_URL, the data is unchanged, and the violation is logged and audited',
      },
      {
        file: 'integration/database-stack.test.ts',
        title: 'refuses an unprepared database before any container starts, naming each grant',
      },
      {
        file: 'integration/gallery.test.ts',
        title:
          'postgres: a SELECT through the server answers; a write after COMMIT; fails for the read role, rows unchanged',
      },
      {
        file: 'unit/plan-sandboxes.test.ts',
        title: 'a role never exceeds what the hints claim nor the profile ceiling, for every combination',
      },
    ],
  },
  {
    id: 'DB-APPEND',
    statement:
      'A sandbox whose tools claim to only add (not read-only, not destructive) gets SELECT and INSERT: UPDATE, DELETE, TRUNCATE and upserts fail; destructive tools get UPDATE and DELETE, never TRUNCATE or DDL.',
    tests: [
      {
        file: 'integration/database-roles.test.ts',
        title: 'INSERTs into a serial and an identity table; existing rows stay as they were',
      },
      {
        file: 'integration/database-roles.test.ts',
        title: 'UPDATEs, DELETEs and upserts, but cannot TRUNCATE or create tables',
      },
      { file: 'integration/database-stack.test.ts', title: 'a tool that claims to only add inserts through its role' },
      {
        file: 'integration/database-stack.test.ts',
        title: 'the adding tool cannot delete or update either (append role), and that is a violation too',
      },
    ],
  },
  {
    id: 'DB-TEARDOWN',
    statement:
      "A session's roles are dropped when it ends, and those of a run killed with SIGKILL at the next start: no role with the hintbox prefix remains and its password no longer logs in.",
    tests: [
      {
        file: 'integration/database-stack.test.ts',
        title: 'after the run, no role with the hintbox prefix remains and its password no longer logs in',
      },
      {
        file: 'integration/database-stack.test.ts',
        title:
          'after a run killed with SIGKILL, the next start drops its roles: none remains and the password no longer logs in',
      },
      {
        file: 'integration/database-roles.test.ts',
        title: 'dropRole ends the open sessions, drops the role, and its password no longer logs in',
      },
      {
        file: 'integration/database-roles.test.ts',
        title:
          "sweepRoles drops the roles of a dead owner, even from another database, and leaves live and other hosts' roles",
      },
    ],
  },
  {
    id: 'DB-RELAY',
    statement:
      'A network-less sandbox reaches its database only through its own Unix socket relay, bound read-only, and only as its own role and database; through it, it can cancel only its own queries.',
    tests: [
      {
        file: 'integration/database-relay.test.ts',
        title:
          'a network-less container running as uid 10001 reaches the database through the bound socket, by PG* variables and by DATABASE_URL, through a read-only bind mount',
      },
      {
        file: 'integration/database-relay.test.ts',
        title: 'refuses a startup for another database or user before Postgres sees it',
      },
      {
        file: 'integration/database-relay.test.ts',
        title: 'cutAll() ends an idle and a busy session at once, cancels the running query, and the relay still works',
      },
      {
        file: 'integration/database-attacks.test.ts',
        title: "passes a CancelRequest on only for the sandbox's own sessions: another client's query runs on",
      },
      {
        file: 'unit/container-spec.test.ts',
        title: 'binds the relay socket directory read-only at the fixed path, and nothing else changes',
      },
    ],
  },
  {
    id: 'DB-CONNECTIONS',
    statement:
      "A sandbox holds at most its role's connection limit of the Postgres server's connections, counted before authentication: the relay refuses startups beyond it and cuts those not done in time, and the server's other clients, the superuser included, still connect.",
    tests: [
      {
        file: 'integration/database-attacks.test.ts',
        title:
          "refuses a sandbox's startups beyond its role's connection limit, so 140 pending ones leave Postgres usable and the superuser gets in",
      },
      {
        file: 'integration/database-attacks.test.ts',
        title: 'cuts a startup that does not authenticate in time, and its slot is free again',
      },
      {
        file: 'integration/database-roles.test.ts',
        title:
          "refuses a connection limit with which a run's roles could take half of what Postgres leaves its clients",
      },
    ],
  },
  {
    id: 'DB-EGRESS',
    statement:
      'A database where a role could make Postgres connect out (the functions of dblink, postgres_fdw or any foreign-data wrapper extension, USAGE on a wrapper or server, a routine in an untrusted language, executable by PUBLIC) stops the run with one line each; after db prepare the attempt reaches nothing.',
    tests: [
      {
        file: 'integration/database-attacks.test.ts',
        title:
          'stops the run with one line each for dblink, postgres_fdw, PUBLIC USAGE on a foreign-data wrapper and a routine in an untrusted language',
      },
      {
        file: 'integration/database-attacks.test.ts',
        title:
          "db prepare revokes EXECUTE on them; a read role's dblink_connect to a canary then fails and the canary receives nothing",
      },
    ],
  },
  {
    id: 'DB-SESSION-BOUNDS',
    statement:
      "A sandbox's database sessions end with its calls as far as they hold something: when endCallSessions returns their transactions, table and advisory locks are gone, and the relay cuts any statement, idle transaction or idle session past the call's bounds, whatever the session SETs.",
    tests: [
      {
        file: 'integration/database-attacks.test.ts',
        title:
          "endCallSessions ends the sandbox's sessions: its advisory lock and idle transaction are gone and the admin's ALTER TABLE goes through",
      },
      {
        file: 'integration/database-attacks.test.ts',
        title:
          "is held to them by the relay: its idle transaction, idle session and long statement end at the call's timeout",
      },
      {
        file: 'integration/database-attacks.test.ts',
        title: 'has its query cancelled by the relay: the backend and its locks do not outlive the socket',
      },
      {
        file: 'integration/database-attacks.test.ts',
        title:
          "the roles hintbox creates bound statements and idle transactions by the call's timeout, without hintbox's help",
      },
      {
        file: 'unit/role-grants.test.ts',
        title: 'bounds statements and idle sessions by the call timeout, and idle transactions by a minute at most',
      },
      {
        file: 'integration/database-stack.test.ts',
        title:
          "ends a sandbox's database sessions when its call ends: a lock its server took and kept is released at once",
      },
      {
        file: 'unit/sandbox-activity.test.ts',
        title:
          'lets a call in only after the idle work (ending database sessions) is done, so it never cuts the new call',
      },
    ],
  },
  {
    id: 'DB-VIOLATION',
    statement:
      "When Postgres refuses a sandbox's session (42501, 25006), hintbox logs a hint violation naming the server and tool, records it on the call's audit outcome, and treats the server as untrusted for the rest of the session.",
    tests: [
      {
        file: 'integration/database-relay.test.ts',
        title: 'reports a privilege error (42501) and a read-only error (25006) through onViolation, and nothing else',
      },
      {
        file: 'integration/database-stack.test.ts',
        title:
          'a read-only tool cannot write through its DATABASE_URL, the data is unchanged, and the violation is logged and audited',
      },
      {
        file: 'integration/database-stack.test.ts',
        title: 'after the violation, the server is untrusted: its read-only tool now needs a confirmation',
      },
      {
        file: 'unit/gateway.test.ts',
        title: 'records a hint violation on the audit outcome of the calls running in that sandbox, and only those',
      },
      {
        file: 'unit/call-guard.test.ts',
        title:
          'a trusted server that broke a hint is untrusted for the rest of the session: its read-only tool now needs a person, and never-approved tools are blocked',
      },
    ],
  },
  {
    id: 'ADVERTISED-HINTS',
    statement:
      "With annotations: enforced (the default), tools/list never tells a client readOnlyHint: true, destructiveHint: false or openWorldHint: false for a tool whose sandbox does not make it true; hintbox's account in _meta says why, and never gives a host path.",
    tests: [
      {
        file: 'unit/advertised-annotations.test.ts',
        title: 'never promises more than the grant allows, for every claim on every ceiling',
      },
      {
        file: 'integration/advertised-hints.test.ts',
        title:
          'advertises readOnlyHint: false for a read-only claim in a sandbox shared with a writer (split: false), with the reason',
      },
      {
        file: 'integration/advertised-hints.test.ts',
        title: 'advertises openWorldHint: false for a tool that claims true on a network: none profile',
      },
    ],
  },
  {
    id: 'CONFIRMATION-OWN',
    statement:
      "hintbox's confirmations begin with 'hintbox asks:' (no server may be named hintbox), and say that data may leave the machine only when the tool's sandbox has a network.",
    tests: [
      {
        file: 'unit/call-guard.test.ts',
        title: "says it is hintbox's own from its first word, so that no server's elicitation passes for it",
      },
      { file: 'unit/call-guard.test.ts', title: 'says data may leave the machine only when the sandbox has a network' },
      { file: 'unit/profile.test.ts', title: 'the name hintbox, which signs its own confirmations' },
    ],
  },
  {
    id: 'SERVE-AUTH',
    statement:
      "With --tokens or --oauth, hintbox serve lets a request reach a server only with credentials that give that server (an OAuth token signed by the issuer's published key with an accepted algorithm, for this issuer, this audience, not expired and not issued in the future), audits every refusal without the token's text, and hands the client's credentials on to nothing behind it.",
    tests: [
      {
        file: 'unit/mcp-http-server.test.ts',
        title: 'serves each token its own sessions, and audits 401 and 403 without the token',
      },
      {
        file: 'unit/serve-kept-alive.test.ts',
        title:
          'refuses, on the connection a JSON answer kept open, a request without a token, of another caller, with a lying Mcp-Method, of another site or Host; nothing runs (attack)',
      },
      {
        file: 'unit/mcp-http-server-oauth.test.ts',
        title: 'answers 401 to every token it cannot trust, names the metadata, and audits each without its text',
      },
      {
        file: 'unit/mcp-http-server-oauth.test.ts',
        title: 'answers 403 insufficient_scope to a token whose scopes do not give the server, naming the caller',
      },
      {
        file: 'unit/mcp-http-server-oauth.test.ts',
        title: 'answers 401 to a token issued in the future (iat beyond the clock tolerance), and serves one within it',
      },
      {
        file: 'unit/mcp-http-server-oauth.test.ts',
        title: 'serves a valid token, names its subject (and client) as the caller, and hands the token on to nothing',
      },
      {
        file: 'integration/serve.test.ts',
        title: 'answers 401 to no or a wrong token, 403 to a token of other servers, and audits each denial',
      },
    ],
  },
  {
    id: 'SERVE-TAGS',
    statement:
      "A serve caller limited to tags (a token's tags, an OAuth scope's) is served only the tools with one of them; a call to another is refused as an unknown tool and never reaches the server, and a session is not used by credentials allowing fewer tags than it was opened with.",
    tests: [
      {
        file: 'integration/serve.test.ts',
        title: 'serves a token at /mcp only the servers (and tags) it may use; none gets 401',
      },
      {
        file: 'integration/serve.test.ts',
        title:
          "serves a token with tags only its tags' tools: another is refused as unknown, and nothing reaches the server",
      },
      {
        file: 'unit/mcp-http-server-oauth.test.ts',
        title: "limits a session to its scopes' tags, and a token allowing fewer tags may not ride on a wider session",
      },
    ],
  },
  {
    id: 'CONTAINER-SAME-PATH',
    statement:
      "hintbox in a container of the engine it drives starts nothing unless every path it binds into sandboxes (profile mounts, its temporary and state folders, its gate) is the host's same path: a mount from elsewhere would give a sandbox another folder than the profile names.",
    tests: [
      {
        file: 'unit/same-path-mounts.test.ts',
        title:
          "names a path mounted from another host path, one in the container's own files and one in a volume, with the -v that fixes it",
      },
      {
        file: 'integration/hintbox-image.test.ts',
        title:
          'refuses to start (exit 2) when a mount is at another path inside than on the host, and starts no sandbox',
      },
    ],
  },
  {
    id: 'IMPORT-UNTRUSTED',
    statement:
      'A profile written by hintbox import grants nothing its source asked for: it is untrusted with no network, the docker options of a config or registry entry (--network host, --privileged, -v) are dropped, and no value of the client config (an API key in env, a password in an argument) is written into it.',
    tests: [
      {
        file: 'unit/import-mapping.test.ts',
        title: 'never copies a literal secret from env: the variable is taken from the host by name',
      },
      {
        file: 'unit/import-mapping.test.ts',
        title: 'docker run → server.image; --network host, --privileged and -v are dropped and named; -e becomes env',
      },
      {
        file: 'unit/import-mapping.test.ts',
        title:
          'oci: the digest is kept; runtimeArguments --network host, --privileged and -v are dropped and named; -e becomes env',
      },
      {
        file: 'integration/import.test.ts',
        title: 'each profile plans and answers a real call under hintbox run; the image runs without network',
      },
    ],
  },
  {
    id: 'IMAGE-DIGEST',
    statement:
      'An image pinned by digest runs only where the engine shows that digest for its repository; an image built or loaded locally under that name is refused, never run unverified.',
    tests: [
      {
        file: 'unit/image-digest.test.ts',
        title:
          'refuses an image built or loaded here (no digest), another digest, or that digest of another repository',
      },
      {
        file: 'integration/import.test.ts',
        title: 'a digest-pinned image that the engine cannot show with that digest is refused, not run',
      },
    ],
  },
  {
    id: 'PACKAGE-PINS',
    statement:
      'A server.npm or server.pypi package is built only from the bytes its package lock beside the profile pins by hash: a tarball or wheel that differs is refused and no image is built; packages are installed on the host, so no sandbox needs a network to start its server.',
    tests: [
      {
        file: 'integration/package-sources.test.ts',
        title: 'refuses to build from an npm lock whose hash the registry tarball does not match',
      },
      {
        file: 'integration/package-sources.test.ts',
        title: 'refuses a wheel whose bytes changed under the same version',
      },
      {
        file: 'integration/package-sources.test.ts',
        title: 'runs an npm package with only server.npm; its read tool lands in a read-only sandbox',
      },
    ],
  },
  {
    id: 'CONSOLE',
    statement:
      "The console answers only who holds its link: a confirmation's link opens and answers that confirmation alone; a request naming another host, or one that changes something without coming from the console's own page (Origin and form token), is refused and changes nothing; an approval there lets exactly that call (session, caller, tool, pin, arguments) run once; no server-made text renders as markup.",
    tests: [
      {
        file: 'integration/console.test.ts',
        title:
          'approves and declines calls of a client without elicitation, approves definitions, and refuses forgeries',
      },
      { file: 'unit/console-server.test.ts', title: "opens with a confirmation's token its page only" },
      {
        file: 'unit/console-server.test.ts',
        title: 'refuses a POST that is not from its own page, and then nothing changed',
      },
      {
        file: 'unit/console-server.test.ts',
        title: 'refuses a request naming another host (DNS rebinding) with 421, before any token or cookie',
      },
      {
        file: 'unit/console-approvals.test.ts',
        title: 'binds an approval to the very call: server, session, caller, tool, pin and arguments',
      },
      { file: 'unit/console-approvals.test.ts', title: 'lets an approval be used once' },
      {
        file: 'unit/console-pages.test.ts',
        title: 'renders, then escapes, every value; html-made values pass as they are',
      },
    ],
  },
  {
    id: 'IMPORT-PUBLISHER-NO-HOST',
    statement:
      "A profile written by hintbox import from a registry entry never mounts a path and never reads a host variable that the publisher chose: each path and secret comes from a variable hintbox names (HINTBOX_<PROFILE>_<WHAT>), the publisher's values and defaults for paths are only quoted in the header, and the header names exactly the variables the profile reads.",
    tests: [
      {
        file: 'integration/import-hostile.test.ts',
        title: 'import writes a profile that reads only HINTBOX_WEATHER_… variables, and its notes name exactly those',
      },
      {
        file: 'integration/import-hostile.test.ts',
        title:
          'run with the variables set to ordinary files: the sandboxes get what the operator set, never the host secrets the entry named',
      },
      {
        file: 'unit/import-host-variables.test.ts',
        title:
          "the hostile entry's profile reads only HINTBOX_WEATHER_… variables; its mounts' sources are those variables",
      },
      {
        file: 'unit/import-host-variables.test.ts',
        title:
          "the notes name exactly the variables the written profile reads (every fixture, the hostile entry's included)",
      },
      {
        file: 'unit/import-host-variables.test.ts',
        title: 'names are [A-Z0-9_], collision-free, and never one of hintbox’s own variables',
      },
    ],
  },
  {
    id: 'CALLER-IDENTITY',
    statement:
      "Under `hintbox serve` a caller is the pair (subject, client), kept as two fields: a token whose subject spells another caller's subject and client cannot use that caller's session (403, nothing runs), a subject or client that cannot be recorded whole is refused (401), never dropped or merged, and sessions, the session cap, the console's one-time grants and audit records go by the pair.",
    tests: [
      {
        file: 'integration/serve-identity.test.ts',
        title: "a subject spelled as another caller's subject and client does not ride that caller's session",
      },
      {
        file: 'integration/serve-identity.test.ts',
        title: 'a client id too long to record is refused (401), never recorded as its subject alone',
      },
      {
        file: 'unit/caller-identity.test.ts',
        title: 'maps two distinct (subject, client) pairs to two distinct keys, and a pair always to the same one',
      },
      {
        file: 'unit/oauth-config.test.ts',
        title: 'names the caller by subject and client, two fields, refusing a part it cannot record whole',
      },
      {
        file: 'unit/audit-caller.test.ts',
        title:
          'records the subject and the client as two fields; a line of before, with both in caller, reads as it was',
      },
      {
        file: 'unit/console-approvals.test.ts',
        title: 'binds an approval to the very call: server, session, caller, tool, pin and arguments',
      },
    ],
  },
  {
    id: 'SESSION-CAP',
    statement:
      'One caller of `hintbox serve` holds at most `--max-sessions` sessions at once, those opening included and each server behind a `/mcp` session counted as one: past it a new session gets 429 before it starts any sandbox.',
    tests: [
      {
        file: 'integration/serve-identity.test.ts',
        title: "a caller's sessions at /mcp count each of their member sessions against the cap",
      },
      {
        file: 'unit/caller-identity.test.ts',
        title: "counts each caller's sessions by weight (a /mcp session one per server), apart for each pair",
      },
      {
        file: 'unit/mcp-http-server.test.ts',
        title: 'refuses a caller more sessions than its limit (429) until one ends',
      },
    ],
  },
  {
    id: 'AUDIT-SINK-ANY-LINE',
    statement:
      "Every line the audit writer can produce ships to the Postgres sink: keys and strings jsonb cannot hold (NUL, lone surrogates, at any depth) are cleaned in the queryable copy only, the exact line stays in the row's text with its hash; a line the database refuses while it answers holds back its own chain alone, is reported with its file and line, and is tried again later, never in a hot loop.",
    tests: [
      {
        file: 'integration/audit-sink.test.ts',
        title: 'ships a call whose argument keys jsonb cannot hold, and it never holds back another chain (attack)',
      },
      {
        file: 'integration/audit-sink.test.ts',
        title: 'property: every line the writer makes of any JSON arguments ships, exactly, and jsonb holds its record',
      },
      {
        file: 'integration/audit-sink.test.ts',
        title:
          'a line the database refuses holds back its own chain only: named with file and line, tried again later, not hot',
      },
      {
        file: 'unit/jsonb-text.test.ts',
        title: 'property: any JSON value comes out as JSON with no key or string jsonb refuses, shaped as it was',
      },
    ],
  },
  {
    id: 'DENIAL-BUDGET',
    statement:
      "Refusals a client can cause at will (a missing or wrong token, a forbidden server, /metrics, a session cap) are written to the audit log and hintbox's log within a fixed budget per remote address and overall, what is over is recorded as a count when its window closes, and metrics count every one: a flood cannot grow the audit folder past that budget nor keep a good client from being served and audited.",
    tests: [
      {
        file: 'integration/denial-flood.test.ts',
        title:
          'records denials within a budget (per address and overall), counts them all, and serves a good client after',
      },
      {
        file: 'integration/denial-flood.test.ts',
        title: 'answers a request target that is not a URL 400, without a log line of its text',
      },
      {
        file: 'unit/mcp-http-server.test.ts',
        title: 'is the client’s affair: no log line per request (any client could cause them at will)',
      },
      {
        file: 'unit/denial-budget.test.ts',
        title: 'bounds all keys together: many addresses get no more than the overall budget',
      },
      {
        file: 'unit/denial-budget.test.ts',
        title:
          'writes down and logs within the budget, counts every refusal, and records what it left out when the window closes',
      },
    ],
  },
  {
    id: 'OPERATOR-FILES-LINKS',
    statement:
      "The operator's files (the profile, its lock file of approved definitions, the package lock, every file of the build folder, serve's tokens or OAuth settings) and every file of hintbox's state folder have one name: one with a second name (a hard link, which no path check sees) is refused at load, before anything starts, and serve's settings file may not lie in a served profile's writable mount either, so no writable mount can change them by any name.",
    tests: [
      {
        file: 'integration/operator-file-links.test.ts',
        title:
          'refuses the run at start when the profile file has a hard link in the workspace: nothing starts, one write_note call to that name cannot rewrite it',
      },
      {
        file: 'integration/operator-file-links.test.ts',
        title:
          'refuses the run at start when the lock file of approved definitions has a hard link in the workspace: nothing starts, one write_note call to that name cannot rewrite it',
      },
      {
        file: 'unit/operator-file-links.test.ts',
        title: 'refuses a profile file that has a hard link in its writable mount, naming the file and why',
      },
      {
        file: 'unit/operator-file-links.test.ts',
        title: 'refuses a lock file of approved definitions, a package lock and a build folder file with a second name',
      },
      {
        file: 'unit/operator-file-links.test.ts',
        title: "refuses any file of hintbox's state folder with a second name",
      },
      {
        file: 'integration/operator-file-links.test.ts',
        title:
          "refuses serve when its tokens file lies in a served profile's writable mount, or has a second name there",
      },
    ],
  },
  {
    id: 'CALL-CEILING',
    statement:
      'A forwarded call ends at timeouts.call however long its server keeps it alive with progress notifications: it is cancelled toward the server, the client gets a RequestTimeout error, the audit records a timeout, and its sandbox runs no server code after it (stopped, or frozen when the last call in it ends).',
    tests: [
      {
        file: 'integration/call-ceiling.test.ts',
        title:
          'ends a call at timeouts.call however long its server sends progress: cancelled, an error for the client, audited as a timeout, its sandbox no longer running',
      },
      {
        file: 'unit/gateway.test.ts',
        title:
          'answers a call past its deadline with RequestTimeout and cancels it upstream; progress does not extend the deadline',
      },
    ],
  },
  {
    id: 'IMAGE-VOLUMES',
    statement:
      "Every writable path in a sandbox is a profile mount (only in classes that may write) or a size-bounded tmpfs: an image's VOLUME paths are masked by a bounded tmpfs (or the sandbox is refused), and no engine volume is made for any sandbox or egress proxy, discovery and previews included, nor left.",
    tests: [
      {
        file: 'integration/sandbox-isolation.test.ts',
        title:
          "an image's VOLUME is a bounded tmpfs: a read-only, network-less server fills it at start and with a read-only tool, and no engine volume is made or left",
      },
      {
        file: 'unit/container-spec.test.ts',
        title:
          "masks the image's VOLUMEs with tmpfs of the profile's bound, in every class and preview (no anonymous volume)",
      },
      {
        file: 'unit/image-volumes.test.ts',
        title:
          'refuses a VOLUME inside a bind mount (its mask would make a mount point in the host folder) and one that is no folder',
      },
      {
        file: 'unit/image-volumes.test.ts',
        title: 'refuses a container the engine gave a volume, whatever else it has',
      },
    ],
  },
  {
    id: 'SANDBOXES-APART',
    statement:
      "No sandbox can reach another sandbox over the network, whatever the grants and across sessions of one serve: open sandboxes get their hintbox process's own bridge without inter-container traffic (never Docker's default bridge; one per process, which no session's teardown removes), the host is no more reachable than before, and that network is labelled, removed when the process ends and swept after a crash.",
    tests: [
      {
        file: 'integration/sandbox-isolation.test.ts',
        title:
          "two clients' open sandboxes of one serve cannot reach each other; both still reach the outside, and hintbox's own port no more than before",
      },
      {
        file: 'integration/sandbox-isolation.test.ts',
        title:
          "two open sandboxes of one run's session cannot reach each other either; a crashed run's open network is swept",
      },
      {
        file: 'unit/open-network.test.ts',
        title: "is a bridge of the hintbox process's own, without traffic between its containers, labelled for cleanup",
      },
      {
        file: 'unit/container-spec.test.ts',
        title: "gets the process's open network (never the engine's default bridge) only when the grant has one",
      },
    ],
  },
  {
    id: 'NO-HOST-PACKAGE-CODE',
    statement:
      "Resolving, locking or installing a server.npm or server.pypi package runs none of its code on the host: pip runs under hintbox's guard, which refuses any requirement that is not a wheel from the index (direct URL, VCS, local path, sdist, editable) before pip fetches or builds it, and lets pip start no Python interpreter or VCS tool, with one line naming it and what asked for it, leaving no lock, image or temp folder, and does not run a pip it cannot guard; npm runs no lifecycle script of the package or any dependency.",
    tests: [
      {
        file: 'integration/package-code.test.ts',
        title:
          "refuses a wheel's direct-URL dependency (file://…sdist) before pip prepares it: its build backend never runs on the host",
      },
      {
        file: 'integration/package-code.test.ts',
        title:
          "refuses a wheel's VCS dependency (git+file://) before pip clones it: its build backend never runs on the host",
      },
      {
        file: 'integration/package-code.test.ts',
        title: 'refuses a dependency the index holds only as an sdist: nothing is built on the host',
      },
      {
        file: 'integration/package-code.test.ts',
        title: 'refuses a direct-URL line in the pip lock before pip prepares it (a lock edited to pull an sdist)',
      },
      {
        file: 'integration/package-code.test.ts',
        title: 'does not run a pip that lacks the internals the guard wraps, and says so in one line',
      },
      {
        file: 'integration/package-code.test.ts',
        title: 'starts no Python interpreter from pip, whatever asks for one (the fence behind the wrapper)',
      },
      {
        file: 'integration/package-code.test.ts',
        title: 'runs no install script of the package the profile names on the host (a file: tarball)',
      },
    ],
  },
  {
    id: 'NPM-HOST-PATHS',
    statement:
      "Resolving, locking or installing a server.npm package never reads a host path a publisher named: a dependency at any depth whose spec is a file: tarball, a local folder, a link: or a git repository is refused before npm reads or clones it, and a lock entry whose resolved is a host path or a link before npm ci, with one line naming it and what asked for it, leaving no lock, image or temp folder and no host file in any image; only the profile's own package may be such a spec.",
    tests: [
      {
        file: 'integration/package-code.test.ts',
        title:
          'refuses a dependency that is a file: tarball on this host before npm reads it: the host file reaches no lock and no image',
      },
      {
        file: 'integration/package-code.test.ts',
        title: 'refuses a dependency that is a git+file: repository on this host before npm clones it',
      },
      {
        file: 'integration/package-code.test.ts',
        title: 'refuses a package lock whose entry is a host path (resolved file:, link: true) before npm installs it',
      },
      {
        file: 'integration/package-code.test.ts',
        title:
          'refuses a file: dependency with an npm that has no allow-* settings (npm 10, as Node 20 ships): the guard alone',
      },
    ],
  },
  {
    id: 'SERVE-HOST-ORIGIN',
    statement:
      'hintbox serve answers, on every path and with or without tokens, only a request whose Host names its own address (the address and port the client reached; localhost on loopback) or a name the operator allows, and no browser page of another site (an Origin not its own or allowed; without one, a cross-site Sec-Fetch-Site): a web page reached through DNS rebinding, or one calling 127.0.0.1 from another site, opens no session, lists or calls no tool, answers no confirmation, reads no metrics, and starts or records nothing.',
    tests: [
      {
        file: 'integration/serve-origin.test.ts',
        title:
          'refuses a page reached through DNS rebinding on every path: no session, call, confirmation or metrics, and nothing started or recorded',
      },
      {
        file: 'integration/serve-origin.test.ts',
        title:
          'refuses a page of another site that calls 127.0.0.1 itself (its Origin, or Sec-Fetch-Site), and nothing happened',
      },
      {
        file: 'integration/serve-origin.test.ts',
        title: "refuses a foreign Host or Origin even with a valid token, and serves the operator's names",
      },
      {
        file: 'unit/request-site.test.ts',
        title: 'answers only its own address: the one the connection reached, with its port, and localhost on loopback',
      },
      {
        file: 'unit/request-site.test.ts',
        title:
          "refuses a page of another site: an Origin not of the request's own Host or allowed, or a cross-site fetch",
      },
      {
        file: 'unit/request-site.test.ts',
        title: 'answers the address of this machine a client used, and no name it was not given',
      },
    ],
  },
  {
    id: 'IMPORT-REGISTRY-PACKAGE-GRAMMAR',
    statement:
      "hintbox import runs a registry entry's package only as a plain npm or PyPI name with an exact version, or an image reference: an identifier or version with anything else (${VAR}, a space, a newline) refuses the whole entry in one line naming the field, and nothing is written.",
    tests: [
      {
        file: 'unit/import-registry-identifiers.test.ts',
        title:
          'an npm identifier foo@${GITHUB_TOKEN}: refused in one line naming the field (exit 2), nothing written, no ${ in any file',
      },
      {
        file: 'unit/import-registry-identifiers.test.ts',
        title:
          'an npm version ${GITHUB_TOKEN}: refused in one line naming the field (exit 2), nothing written, no ${ in any file',
      },
      {
        file: 'unit/import-registry-identifiers.test.ts',
        title:
          'a PyPI identifier x${HOME}: refused in one line naming the field (exit 2), nothing written, no ${ in any file',
      },
      {
        file: 'unit/import-registry-identifiers.test.ts',
        title:
          'an OCI image x:${HOME}: refused in one line naming the field (exit 2), nothing written, no ${ in any file',
      },
      {
        file: 'unit/import-registry-identifiers.test.ts',
        title:
          'an OCI version ${HOME} (the tag of an untagged image): refused in one line naming the field (exit 2), nothing written, no ${ in any file',
      },
      {
        file: 'unit/import-registry-identifiers.test.ts',
        title: 'a hostile package is not passed over for the next one: the whole entry is refused',
      },
    ],
  },
  {
    id: 'IMPORT-REGISTRY-MOUNT-NAMES',
    statement:
      "Each path argument of a registry entry gets a mount of its own, named after its own variable (dir, dir_2), so the imported profile loads and each argument refers to its own mount's target.",
    tests: [
      {
        file: 'unit/import-registry-identifiers.test.ts',
        title: 'get a mount each (dir, dir_2): the profile loads, and each argument names its own mount',
      },
    ],
  },
  {
    id: 'AUDIT-LINE-SCHEMA',
    statement:
      "Every audit line is read through its type's zod schema: a line whose declared field no hintbox wrote so (a wrong type) is a break in audit verify, though its hash chain is intact; lines of earlier versions still read, and a lock file that would not read back is never written.",
    tests: [
      {
        file: 'unit/audit-line-schema.test.ts',
        title: 'audit verify names a line whose field no hintbox wrote so, though its chain is intact',
      },
      {
        file: 'unit/audit-line-schema.test.ts',
        title: 'reads lines of earlier versions: without the fields added since, and with fields it does not know',
      },
      {
        file: 'unit/lock-file.test.ts',
        title: 'reads a lock file as an earlier hintbox wrote it, and never writes one that would not read back',
      },
    ],
  },
  {
    id: 'CATALOG-LIST-CAP',
    statement:
      'Every list hintbox reads from a server (tools, prompts, resources, resource templates) is capped at 10,000 items and 100 pages: a server that lists more fails the start, naming the list, and no page after the one past the cap is asked for.',
    tests: [
      {
        file: 'integration/list-flood.test.ts',
        title: 'lists no more than 10,000 of its tools: the start fails naming tools/list, after two pages',
      },
      {
        file: 'integration/list-flood.test.ts',
        title: 'lists no more than 10,000 resource templates either: one rule for every kind',
      },
      {
        file: 'unit/list-all.test.ts',
        title: 'one page of a million items fails too (and does not overflow the stack on the way)',
      },
    ],
  },
  {
    id: 'AUDIT-CHECKPOINTS',
    statement:
      "A person who can write the audit folder but does not hold hintbox's key cannot cut a chain's tail (1 or 1,000 records), delete its newest file, rewrite it with fresh hashes, add a forged chain, delete the checkpoints file, or put an old one back without `hintbox audit verify` failing, naming the file and line; records after an open chain's last checkpoint (a crash) are reported as not yet covered, and everything before verifies.",
    tests: [
      { file: 'unit/audit-checkpoints.test.ts', title: 'the last record of a closed log cut off' },
      { file: 'unit/audit-checkpoints.test.ts', title: 'the last 1,000 records cut off' },
      { file: 'unit/audit-checkpoints.test.ts', title: 'the newest file of a chain deleted' },
      { file: 'unit/audit-checkpoints.test.ts', title: 'a whole chain rewritten with its hashes recomputed' },
      {
        file: 'unit/audit-checkpoints.test.ts',
        title: 'a forged chain added (with checkpoints signed by a key of its own)',
      },
      { file: 'unit/audit-checkpoints.test.ts', title: 'the checkpoints file deleted' },
      { file: 'unit/audit-checkpoints.test.ts', title: 'an old checkpoints file put back (replayed)' },
      {
        file: 'unit/audit-checkpoints.test.ts',
        title: 'a checkpoint line edited (its count raised to cover a cut), or removed from the middle',
      },
      {
        file: 'unit/audit-checkpoints.test.ts',
        title: 'are reported as not covered, and everything up to the last checkpoint verifies',
      },
      {
        file: 'integration/audit-crash.test.ts',
        title:
          "an auditor with only the public key verifies a copy of the folder; the killed run's records after its last checkpoint are reported not yet covered",
      },
    ],
  },
  {
    id: 'AUDIT-KEY',
    statement:
      'The audit signing key is made owner-only (0600) outside the audit folder, and hintbox refuses a key file others can read, one inside the audit folder, or a symlink; an auditor verifies with the public key alone.',
    tests: [
      {
        file: 'unit/audit-checkpoints.test.ts',
        title:
          'is made owner-only at first use, and refused when others can read it, inside the audit folder, or a symlink',
      },
      {
        file: 'integration/audit-crash.test.ts',
        title:
          "an auditor with only the public key verifies a copy of the folder; the killed run's records after its last checkpoint are reported not yet covered",
      },
    ],
  },
  {
    id: 'CALL-TRACES',
    statement:
      "With an OTLP endpoint set, each call is one span, a child of the client's traceparent when it sent one, carrying the decision, who decided, the sandbox and the outcome, and never the call's arguments.",
    tests: [
      {
        file: 'integration/call-traces.test.ts',
        title:
          'sends one span per call to the OTLP collector, a child of the client traceparent, with the decision and outcome but not the arguments',
      },
    ],
  },
  {
    id: 'TRUST-KEYS-HAVE-EFFECT',
    statement:
      'A profile key that can have no effect for its trust level (a tool rule `approval: allow` or a `preApprove` entry on an untrusted profile) is refused at load with one line naming the field and why, instead of being ignored in silence.',
    tests: [
      {
        file: 'unit/trust-key-effects.test.ts',
        title: 'refuses approval: allow and pre-approvals on an untrusted profile, and nothing on a trusted one',
      },
      {
        file: 'unit/profile.test.ts',
        title: 'refuses at load a tool rule approval: allow on an untrusted profile, in one line saying why',
      },
    ],
  },
  {
    id: 'STANDING-ANSWERS',
    statement:
      'A standing answer ("allow always" for a tool and argument patterns) is created only by a person with `hintbox approve --always`, never from a form or anything a client or server sends; it lives in the lock file (outside every writable mount), applies only to the definition approved when it was given and only to arguments inside its patterns, never overrides a profile `confirm` rule or a server that broke a hint, is read at every call (revocation holds at once), is voided by a definition change (audited), and each call it lets run is audited as decided by it.',
    tests: [
      {
        file: 'unit/standing-answer.test.ts',
        title:
          'asks again for arguments outside the patterns: a missing argument, a walk out of the folder, a partial regex match',
      },
      {
        file: 'unit/call-guard-answers.test.ts',
        title:
          "runs an untrusted server's call on the person's standing answer without a question, audited as decided by it and naming it",
      },
      {
        file: 'unit/call-guard-answers.test.ts',
        title: 'asks the person again for arguments outside the standing answer, and for every call once it is revoked',
      },
      {
        file: 'unit/call-guard-answers.test.ts',
        title:
          'voids a standing answer given for another definition of the tool: asks the person, audits the voiding once',
      },
      {
        file: 'unit/call-guard-answers.test.ts',
        title:
          'never stands in for a profile rule that demands confirmation, nor after the server broke a hint, nor for a tool that is not approved',
      },
      {
        file: 'integration/standing-answers.test.ts',
        title:
          'runs calls on a standing answer given with approve --always, only inside its pattern; never creates one from a form; revoked at once; voided by a definition change',
      },
    ],
  },
  {
    id: 'FORM-ANSWER-SAID',
    statement:
      'Only a ticked "approve" in the confirmation form runs the call: a form submitted without it is a denial, and the client\'s answer and the audit record say why.',
    tests: [
      {
        file: 'unit/call-guard-answers.test.ts',
        title: 'records a form accepted without ticking approve as declined, and says why in the answer and the audit',
      },
    ],
  },
  {
    id: 'CLIENT-TOLD-WHY',
    statement:
      "A client shown fewer tools than the server lists is told why in initialize's instructions (hintbox's own note naming `hintbox approve <profile> --all`, never the server's unapproved text), and a refused call's answer names what the person must do.",
    tests: [
      {
        file: 'integration/standing-answers.test.ts',
        title: 'tells a client that sees no tools why, in the initialize instructions, naming hintbox approve',
      },
    ],
  },
  {
    id: 'PLAN-SAYS-WHY',
    statement:
      "`hintbox plan` warns when a tool that says it is open-world will have no network, and says per tool why each hint a client is told differs from the server's claim.",
    tests: [
      {
        file: 'unit/plan-warnings.test.ts',
        title:
          'warns when an open-world tool will have no network, and says why each advertised hint differs from the claim',
      },
    ],
  },
  {
    id: 'CLIENT-ENTRY-SECRETS',
    statement:
      'The client entry hintbox install prints never holds the value of a variable whose name looks like a secret (TOKEN, SECRET, KEY, PASSWORD, AUTH, CREDENTIAL, or ending in _URL, such as HINTBOX_DATABASE_URL): a placeholder stands in, and the name is reported so the person fills it in.',
    tests: [
      {
        file: 'unit/client-entry.test.ts',
        title: 'never prints the value of a secret-looking variable: a placeholder, and the name is reported',
      },
    ],
  },
  {
    id: 'EGRESS-CLIENTS',
    statement:
      "A server's HTTP clients reach its listed hosts through the egress proxy as they are written (Node's fetch, undici, got, http/https, axios over HTTP, curl, Python's requests, httpx and urllib, Go's net/http; HTTPS in a CONNECT tunnel), and an unlisted host is refused to each of them.",
    tests: [
      {
        file: 'integration/egress-clients.test.ts',
        title:
          'each client, unchanged, reaches a listed host over HTTP and HTTPS through the proxy, and is refused an unlisted one',
      },
    ],
  },
  {
    id: 'EGRESS-ONLY-PROXY',
    statement:
      "The Node base's egress preload is a convenience, not the fence: a server that goes around the proxy (a socket of its own, a fetch dispatcher of its own) reaches no host, listed or not, by address or by name.",
    tests: [
      {
        file: 'integration/egress-clients.test.ts',
        title: 'a server that goes around the proxy, by a socket of its own or a dispatcher of its own, has no route',
      },
    ],
  },
  {
    id: 'EGRESS-GALLERY-FETCH',
    statement:
      "The gallery's fetch server, as published, reaches only the hosts its profile lists, through the egress proxy; an unlisted host is never reached.",
    tests: [
      {
        file: 'integration/gallery.test.ts',
        title:
          "fetch: a listed canary's page comes back through the egress proxy, the server unchanged; an unlisted host is refused",
      },
    ],
  },
  {
    id: 'SOCKET-PATH-LENGTH',
    statement:
      "The sockets hintbox makes for a sandbox (its gate, its database relay) work with a $TMPDIR of any length: when the longest socket path would not fit a Unix socket (103 bytes), they go in an owner-only folder of /tmp instead, which the sweep, the own-path check and serve's bind check know too; a path that still does not fit is refused naming the limit and the path.",
    tests: [
      {
        file: 'integration/pooled-database.test.ts',
        title:
          'runs a database session with TMPDIR a 90-character folder: the gate and relay sockets are made in a short, owner-only folder and removed after',
      },
      {
        file: 'unit/unix-socket.test.ts',
        title: 'keeps a short TMPDIR and falls back to /tmp for a long one, so the longest socket path fits',
      },
      {
        file: 'unit/unix-socket.test.ts',
        title:
          'makes the folder owner-only, and a path that still does not fit is refused naming the limit and the path',
      },
    ],
  },
  {
    id: 'DB-CALL-END',
    statement:
      "At a call's end hintbox ends every database session of the sandbox that could still act — running a statement, in a transaction, holding any lock (an advisory lock of an idle session included, found in pg_locks), or having run a statement not known to leave nothing behind (LISTEN, a DO block, …), or that it cannot account for — and keeps only a clean idle connection, which it judges again at the next call's end.",
    tests: [
      {
        file: 'integration/database-call-end.test.ts',
        title:
          'ends the sessions idle in a transaction, holding an advisory lock while idle, listening (by LISTEN or inside a DO block) or running a query, and keeps the clean idle one',
      },
      {
        file: 'integration/database-call-end.test.ts',
        title:
          'judges a kept connection again at the next call: the advisory lock and the LISTEN it took since end with that call',
      },
      {
        file: 'unit/call-end-sessions.test.ts',
        title:
          "joins the relay's view and Postgres's: either one ends a session, and what neither accounts for ends too",
      },
      {
        file: 'unit/call-end-sessions.test.ts',
        title:
          'marks a session by the tags of what it ran: reads, writes and transaction control leave nothing; LISTEN, DO, CALL, DECLARE and unknown tags do',
      },
    ],
  },
  {
    id: 'DB-POOL-KEPT',
    statement:
      "A database server's pool survives hintbox's call ends: the published server-postgres 0.6.2, unpatched, answers 20 calls mixing reads and refused writes without a sandbox dying, and each refused write is audited as a hint violation of its call.",
    tests: [
      {
        file: 'integration/pooled-database.test.ts',
        title:
          'server-postgres 0.6.2 as shipped, without a preload, answers 20 calls mixing reads and refused escapes: none dies, each escape is audited as a hint violation',
      },
    ],
  },
  {
    id: 'K8S-SCHEMA',
    statement:
      'Every Kubernetes object hintbox renders (sandbox Pods, NetworkPolicies, egress proxies) and ships (deploy/base) passes the API schemas with no field they do not know, so no setting is silently dropped by the API server.',
    tests: [
      {
        file: 'unit/kubernetes-render.test.ts',
        title: 'renders only objects the Kubernetes API schemas accept, with no field they do not know',
      },
      {
        file: 'unit/kubernetes-render.test.ts',
        title: 'the strict schema walk refuses a misspelt field that the schema validators alone accept',
      },
      {
        file: 'unit/kubernetes-deploy.test.ts',
        title: 'lists every manifest, and each passes the API schemas with no unknown field',
      },
      {
        file: 'integration/kubernetes-podman.test.ts',
        title:
          "prints the filesystem server's Pods and NetworkPolicies as one List that passes the API schemas and the restricted level",
      },
    ],
  },
  {
    id: 'K8S-RESTRICTED',
    statement:
      "Every sandbox Pod, egress proxy Pod and hintbox's own Deployment meets the restricted Pod Security level (non-root, no privilege escalation, all capabilities dropped, seccomp RuntimeDefault, only PVC, emptyDir, ConfigMap and Secret volumes), and a sandbox Pod has no service-account token, no service links, its own user namespace, a read-only root and requests equal to limits.",
    tests: [
      {
        file: 'unit/kubernetes-render.test.ts',
        title: 'every rendered Pod meets the restricted Pod Security level, and a breach of each control is named',
      },
      {
        file: 'unit/kubernetes-render.test.ts',
        title:
          'hardens every sandbox Pod: no token, no service links, own user namespace, requests equal limits, memory scratch with a size',
      },
      {
        file: 'unit/kubernetes-deploy.test.ts',
        title: 'runs hintbox serve under the restricted Pod Security level, probed on /healthz and /readyz',
      },
    ],
  },
  {
    id: 'K8S-READONLY-MOUNTS',
    statement:
      "On Kubernetes a read-only class's data mounts are readOnly with recursiveReadOnly: Enabled; run for real (podman kube play), the filesystem server's write tool gets EROFS there and the file is unchanged.",
    tests: [
      {
        file: 'unit/kubernetes-render.test.ts',
        title:
          'mounts the data read-only and recursively so in read-only classes, read-write only where the grant says',
      },
      {
        file: 'integration/kubernetes-podman.test.ts',
        title:
          "runs the filesystem server's read-only class: the read tool answers, the write tool gets EROFS, the file is unchanged",
      },
    ],
  },
  {
    id: 'K8S-NETWORK',
    statement:
      "Every sandbox Pod gets a deny-all NetworkPolicy (ingress and egress); an egress class may reach only its session's egress proxy Pod on the proxy port (enforced only by a network plugin that enforces NetworkPolicy).",
    tests: [
      {
        file: 'unit/kubernetes-render.test.ts',
        title:
          'gives every sandbox a deny-all NetworkPolicy; an egress class may reach only its proxy Pod, on the proxy port',
      },
    ],
  },
  {
    id: 'K8S-RBAC',
    statement:
      "hintbox's shipped Role grants only pods, pods/attach, pods/log, services and networkpolicies in its own namespace: no Secrets, no exec, no cluster-wide rights.",
    tests: [
      {
        file: 'unit/kubernetes-deploy.test.ts',
        title: 'grants hintbox only pods, pods/attach, pods/log, services and networkpolicies in its namespace',
      },
    ],
  },
  {
    id: 'K8S-ATTACH',
    statement:
      "On Kubernetes hintbox reaches a sandbox's gate over the API's attach (never the pod network): the gate answers with its token and runs nothing of the image until hintbox's release; an attach closed before the release never runs the server.",
    tests: [
      {
        file: 'unit/kubernetes-attach.test.ts',
        title: 'holds the server at the gate until release, then speaks MCP over the attach channels',
      },
      { file: 'unit/kubernetes-attach.test.ts', title: 'a held gate closed without release never runs the server' },
    ],
  },
  {
    id: 'DB-CALL-END-LISTING',
    statement:
      'A request hintbox itself sends to a sandbox (a listing after a list_changed) counts as a call in flight there: a held sandbox is thawed for it, and the end of a call never judges, and so never ends, the database sessions the listing uses.',
    tests: [
      {
        file: 'integration/database-stack.test.ts',
        title:
          "never ends the database session of hintbox's own listing as a call ends: a tools/list that reads the database for 3 s, asked as the announcing call answers, completes",
      },
      {
        file: 'unit/sandbox-pool.test.ts',
        title:
          'counts a listing in a sandbox that runs free as a call in flight: the idle work (ending database sessions) waits until it is over',
      },
    ],
  },
  {
    id: 'AUDIT-SINK-ANCHOR',
    statement:
      "With the Postgres sink configured, the audit folder's signed checkpoints are copied there, and `hintbox audit verify --sink` holds the folder against them: a chain deleted together with its checkpoint lines, or the folder rolled back to an older copy (files and checkpoints), fails verify though the folder alone verifies, and nothing the folder's writer does changes the rows that show it.",
    tests: [
      {
        file: 'integration/audit-sink-checkpoints.test.ts',
        title:
          'the newest chain deleted together with its checkpoint lines: the folder verifies, the sink names the chain (attack)',
      },
      {
        file: 'integration/audit-sink-checkpoints.test.ts',
        title: 'the folder rolled back to an older copy, files and checkpoints: the sink finds the tail cut (attack)',
      },
      {
        file: 'integration/audit-sink-checkpoints.test.ts',
        title:
          "a line planted ahead of the chain's next checkpoint does not keep the real one out of the sink (attack)",
      },
    ],
  },
  {
    id: 'EGRESS-NO-HOST',
    statement:
      "A sandbox with egress by host name gets nothing from a service listening on the engine's host, at any of the host's addresses, the gateway of any network it is on, or the host's names in the engine (host.docker.internal, host.containers.internal), on Docker and on Podman alike: it has no network at all, and its one way out is its class's proxy, reached through its gate's relay over a Unix socket.",
    tests: [
      {
        file: 'integration/egress-host.test.ts',
        title: "an open-world sandbox gets nothing from a service on the engine's host, at any of its addresses",
      },
    ],
  },
  {
    id: 'PODMAN-NETWORKS',
    statement:
      "On Podman (detected from the engine's /version), whose internal networks reach the host (shown by a plain container on one), hintbox puts no sandbox on an engine network: egress goes through the gate's relay, and a class with an open network is refused at its start with a one-line error, before any network, proxy or container is made.",
    tests: [
      {
        file: 'unit/podman-engine.test.ts',
        title:
          'starts network-less and egress sandboxes on Podman (egress is no network: the relay); refuses an open one',
      },
      {
        file: 'integration/egress-host.test.ts',
        title: "an open-world sandbox gets nothing from a service on the engine's host, at any of its addresses",
      },
      {
        file: 'integration/egress-host.test.ts',
        title:
          'the isolation removed: a container on an internal engine network reaches the host on Podman (not on Docker)',
      },
    ],
  },
  {
    id: 'EGRESS-RELAY-FROZEN',
    statement:
      'While a held sandbox is frozen between calls its gate relays nothing to or from the egress proxy: no connection is accepted and no byte moves either way, so a request written just before the freeze reaches the proxy only after the thaw.',
    tests: [
      {
        file: 'unit/gate-egress-relay.test.ts',
        title: 'relays nothing while the sandbox is frozen: a request made just before the freeze waits for the thaw',
      },
    ],
  },
  {
    id: 'EGRESS-RELAY-TOKEN',
    statement:
      "The egress proxy takes only connections that its class's gates relayed (each begins with the class's egress token, which the server never sees): a connection made straight to the proxy's socket, by the server or anyone else, reaches nothing.",
    tests: [
      {
        file: 'unit/gate-egress-relay.test.ts',
        title: "refuses a connection to the proxy's socket that did not come through a gate (no token)",
      },
    ],
  },
  {
    id: 'EGRESS-RELAY-ENV',
    statement:
      'Every sandbox gets the egress relay variables from hintbox (empty without egress), so neither the image nor the profile can turn the relay on or point it elsewhere, and the gate unsets them before the server runs.',
    tests: [
      {
        file: 'unit/container-spec.test.ts',
        title:
          "egress is no network: the proxy's folder read-only and the relay's variables, always set so the image cannot set them",
      },
    ],
  },
  {
    id: 'EGRESS-PROXY-MODE',
    statement:
      'The gate runs in egress proxy mode only where hintbox did not set HINTBOX_GATE_SOCKET (the proxy container): a sandbox whose command (the image ENTRYPOINT) starts with --egress-proxy is refused before anything runs, so an image cannot skip the release or keep the gate variables.',
    tests: [
      {
        file: 'unit/gate-egress-relay.test.ts',
        title: 'a sandbox whose command starts with --egress-proxy is refused: nothing runs, nothing listens',
      },
    ],
  },
  {
    id: 'EGRESS-RELAY-TOKEN-ORACLE',
    statement:
      "The egress proxy's gate compares a connection's token only once its whole line is in (or the proof deadline passed), in constant time: a right prefix and a wrong one are closed alike, so the token cannot be guessed a digit at a time.",
    tests: [
      {
        file: 'unit/gate-egress-relay.test.ts',
        title:
          'answers a right token prefix and a wrong one alike: both closed at the proof deadline, whole lines both refused',
      },
    ],
  },
  {
    id: 'EGRESS-RELAY-PROOF-DEADLINE',
    statement:
      "A connection to the egress proxy's socket that has not sent its token line within 2 s is closed, so idle connections cannot hold the proxy's 64 slots and lock out the sandboxes.",
    tests: [
      {
        file: 'unit/gate-egress-relay.test.ts',
        title: '65 idle connections without a token do not lock the proxy out: they are closed at the deadline',
      },
    ],
  },
  {
    id: 'EGRESS-RELAY-LOOPBACK',
    statement:
      "The relayed egress proxy (Docker, Podman) listens on its container's loopback only and serves only loopback clients (the relay); the Kubernetes proxy Pod listens on every address, and its NetworkPolicy chooses its clients.",
    tests: [
      {
        file: 'unit/squid-config.test.ts',
        title: 'listens on loopback only for the relayed proxy, on every address for the Kubernetes Pod',
      },
    ],
  },
  {
    id: 'EGRESS-SOCKET-FOLDER',
    statement:
      "When hintbox runs as root, the folder of an egress proxy's socket is given back to root (the sandboxes' group, mode 0710) once the proxy listens: another local user cannot reach the socket, and a host process of the proxy's uid cannot replace it (EACCES). The socket's name is random (the folder is not listable).",
    tests: [
      {
        file: 'integration/egress-host.test.ts',
        title: "an open-world sandbox gets nothing from a service on the engine's host, at any of its addresses",
      },
    ],
  },
  {
    id: 'EGRESS-SOCKET-SWEEP',
    statement:
      "Another hintbox's sweep never removes a live run's egress socket folder (listened on inside the proxy's container, unseen in the host's /proc/net/unix): a folder whose owner process is alive is kept at any age.",
    tests: [
      {
        file: 'unit/sweep-socket-dirs.test.ts',
        title:
          "keeps an old folder whose process is alive though nobody listens in it as this host sees (a proxy's socket, in a container)",
      },
    ],
  },
  {
    id: 'K8S-ENGINE',
    statement:
      "hintbox's Kubernetes engine makes a sandbox's deny-all NetworkPolicy before its Pod, runs nothing of the image until the release (the gate, asked over the attach, answers with its token), and fails closed in one line when the image cannot be pulled, the API refuses an object, or the grant needs a database or an open network, leaving no Pod and no NetworkPolicy; outside a Pod it takes no Pod for its own (owner, gate image).",
    tests: [
      {
        file: 'unit/kubernetes-engine.test.ts',
        title:
          'holds a sandbox Pod behind its NetworkPolicy, runs nothing until release, then speaks MCP; removeSession leaves nothing',
      },
      {
        file: 'unit/kubernetes-engine.test.ts',
        title: 'an image the cluster cannot pull fails the start in one line, and leaves no Pod and no NetworkPolicy',
      },
      {
        file: 'unit/kubernetes-engine.test.ts',
        title:
          'an API that refuses the Pod (RBAC) fails the start in one line, and the NetworkPolicy made before it is deleted',
      },
      {
        file: 'unit/kubernetes-engine.test.ts',
        title: 'a database grant or an open network is refused before anything is sent to the cluster',
      },
      {
        file: 'unit/kubernetes-engine.test.ts',
        title: 'refuses to start, in one line, without a cluster or, outside a Pod, without a gate image',
      },
      {
        file: 'unit/kubernetes-engine.test.ts',
        title:
          'an egress class gets its proxy Pod, Service and policy first, and reaches it by the Service address only',
      },
    ],
  },
  {
    id: 'K8S-SWEEP',
    statement:
      "On Kubernetes hintbox's sweep removes the Pods, Services and NetworkPolicies of hintbox processes that are gone (this host's by pid, another's when its owner Pod is gone or replaced) and never those of a live owner or of an owner it cannot judge.",
    tests: [
      {
        file: 'unit/kubernetes-engine.test.ts',
        title:
          'sweep removes the objects of dead hintbox processes (this host) and of owner Pods that are gone, and nothing else',
      },
      {
        file: 'integration/kubernetes-run.test.ts',
        title:
          "serves the server's tools from sandbox Pods; the Pods a killed hintbox left are swept by the next start and by hintbox sweep",
      },
    ],
  },
  {
    id: 'APPROVE-ASKS',
    statement:
      'hintbox approve writes definitions into the lock file only on a yes: the y/N answer of a person at a terminal after the review, or --yes given beforehand; without a terminal and without --yes it refuses in one line, starts nothing and writes nothing.',
    tests: [
      {
        file: 'integration/approve-review.test.ts',
        title:
          'approve without a terminal and without --yes approves nothing: one line naming --yes, exit 2, no lock file, nothing started',
      },
      {
        file: 'integration/approve-review.test.ts',
        title: 'approve on a terminal shows the review, then asks y/N: no writes nothing, y writes the lock',
      },
    ],
  },
  {
    id: 'LISTING-NEEDS-NO-RUNTIME-INPUTS',
    statement:
      'approve and plan list the tools in a read-only sandbox without what only a run needs: an env entry whose variable is unset is left out (and named), an unwritable workspace is warned about; hintbox run still refuses both.',
    tests: [
      {
        file: 'integration/approve-review.test.ts',
        title:
          'approve and plan list a server whose token is unset and whose workspace the sandbox user cannot write; run refuses both',
      },
    ],
  },
  {
    id: 'NETWORK-REFUSAL-AUDITED',
    statement:
      'An open-world tool run in a sandbox without a network whose answer, not marked isError, reads as a network failure (fetch failed, a name that does not resolve) is audited as a tool-error naming the network, never as ok; ordinary answers are not read as refusals.',
    tests: [
      {
        file: 'integration/network-refusal.test.ts',
        title:
          'an open-world tool under network: none whose answer reads as a network failure, not marked isError, is audited as a tool-error by the network',
      },
      {
        file: 'unit/network-refusal.test.ts',
        title: 'takes "fetch failed" and resolver errors of an open-world tool without a network, and nothing else',
      },
    ],
  },
  {
    id: 'CONSOLE-OUTLIVES-RUNS',
    statement:
      "A person's answer on the console that outlives the runs (hintbox console) lets exactly the call it was given for (server, caller, tool, pin, arguments) run once in a later run within its window; another call, a second repeat, or a call after the window is asked again and changes nothing.",
    tests: [
      {
        file: 'integration/first-hour.test.ts',
        title:
          'a client that exits after each call: denied with the console link, approved there after its run ended, the same call runs once in the next run',
      },
      {
        file: 'unit/shared-approvals.test.ts',
        title:
          'an answer given after its run ended holds for the same call of another session, once, within its window',
      },
    ],
  },
  {
    id: 'IMPORT-NETWORK-ALLOW',
    statement:
      "hintbox import never proposes an open network: an imported profile's network is an allow list of the public hosts its entry names (host:port only, never a URL's credentials, path or query), else none.",
    tests: [
      {
        file: 'unit/named-hosts.test.ts',
        title: 'proposes network.allow of the public hosts the entry names (host:port only), else none',
      },
    ],
  },
  {
    id: 'IMPORT-SAFE-REWRITE',
    statement:
      'hintbox import never overwrites a profile the operator edited without --force and a byte-for-byte backup, never writes through a symbolic link, and run twice with --rewrite changes nothing and exits 0.',
    tests: [
      {
        file: 'integration/import-safety.test.ts',
        title:
          'import --rewrite run twice: the second has nothing left to do, exit 0, config and profile byte-identical',
      },
      {
        file: 'integration/import-safety.test.ts',
        title:
          'an edited profile: refused without --force (one line, unchanged); with --force yours is kept as a backup; an identical one is left as it is',
      },
      {
        file: 'integration/import-safety.test.ts',
        title: 'writes nothing through a symbolic link: the config --rewrite would rewrite, or a profile',
      },
    ],
  },
  {
    id: 'MRTR-CONFIRM',
    statement:
      'A 2026-era client (MCP 2026-07-28) whose call needs a person is answered input_required with the same confirmation a 2025 client is shown, and nothing runs until its retry carries the approval; the approved retry runs the call once.',
    tests: [
      {
        file: 'integration/input-required.test.ts',
        title: 'asks a 2026 client with input_required (the form a 2025 client gets) and runs the approved retry once',
      },
      {
        file: 'unit/input-required-confirmation.test.ts',
        title: 'answers input_required with the form, records no call until the retry, then runs the approved retry',
      },
    ],
  },
  {
    id: 'MRTR-STATE',
    statement:
      'The requestState of a confirmation is signed with a key of the hintbox process, expires with the approval timeout on a monotonic clock (a wall clock stepped forward then back revives nothing), is bound to the caller, server, tool, pin and canonical arguments of the call it asked about, and is redeemed once: a retry whose state is replayed, altered, forged, minted by another process, expired or carried to another call runs nothing and is audited (approval.refused, a denied call record decided by request-state), whatever capabilities the retry declares.',
    tests: [
      {
        file: 'integration/input-required.test.ts',
        title: 'runs nothing for a requestState used a second time (replay), and audits the refusal',
      },
      {
        file: 'integration/input-required.test.ts',
        title: 'refuses a requestState carried to other arguments or another tool, and runs nothing',
      },
      {
        file: 'integration/input-required.test.ts',
        title: 'refuses a requestState altered in one character or minted by another hintbox process',
      },
      {
        file: 'integration/input-required.test.ts',
        title: 'refuses a requestState redeemed after the time a person has to answer',
      },
      {
        file: 'integration/input-required.test.ts',
        title: "refuses alice's requestState carried by bob (another caller of serve), runs nothing, and audits it",
      },
      { file: 'unit/request-state.test.ts', title: 'redeems a state once, for exactly the call it was minted for' },
      {
        file: 'unit/request-state.test.ts',
        title: 'refuses a state carried to another caller, server, tool, pin or arguments, naming what differs',
      },
      {
        file: 'unit/request-state.test.ts',
        title: 'refuses a state altered in any part, signed under another key (another process), or malformed',
      },
      { file: 'unit/request-state.test.ts', title: 'refuses a state once its time has passed' },
      {
        file: 'unit/request-state.test.ts',
        title:
          'keeps time on a monotonic clock: a wall clock stepped forward then back neither revives a used state nor expires a fresh one',
      },
      {
        file: 'unit/input-required-confirmation.test.ts',
        title:
          'redeems the state of a retry that declares no elicitation: a forged state, or answers without one, are refused and audited',
      },
    ],
  },
  {
    id: 'MRTR-NO-BYPASS',
    statement:
      'A requestState is never authentication nor a decision: every retry is decided afresh (pins, rules, trust), so a valid state for a tool that has since been blocked or denied runs nothing, and an approval given to another question (the server lost trust, the reasons or warnings changed since) does not count: the person is asked again.',
    tests: [
      {
        file: 'unit/input-required-confirmation.test.ts',
        title: 'never lets a valid state skip the decision: a tool blocked since it was asked stays blocked',
      },
      {
        file: 'unit/input-required-confirmation.test.ts',
        title:
          'asks again when the server lost trust between the question and the retry: an answer to another question does not count',
      },
    ],
  },
  {
    id: 'MRTR-OWN-RESULT',
    statement:
      "A 2026-era client gets resultType input_required only from hintbox itself: a server's result is always passed as complete, so a server cannot ask the person through input_required past hintbox's policy of what a server may ask.",
    tests: [
      {
        file: 'unit/protocol-era.test.ts',
        title: "stamps every result complete but hintbox's own: a server cannot answer input_required past hintbox",
      },
    ],
  },
  {
    id: 'MRTR-ADVERTISED',
    statement:
      'A 2026-era client is told the same tools, enforced hints and _meta["io.hintbox/enforced"] as a 2025 client, in lists marked cacheScope private with ttlMs 0 (filtered per caller: never cached, never shared).',
    tests: [
      {
        file: 'integration/modern-client.test.ts',
        title: 'tells a 2026 client the tools, enforced hints and _meta a 2025 client is told, and runs its calls',
      },
      {
        file: 'unit/protocol-era.test.ts',
        title: "stamps every result complete but hintbox's own: a server cannot answer input_required past hintbox",
      },
    ],
  },
  {
    id: 'MRTR-UPSTREAM',
    statement:
      "A server never sees a 2026 client's round trip: the requestState, the person's inputResponses and the 2026 _meta envelope are removed before a call is forwarded (progress and trace context pass).",
    tests: [
      {
        file: 'unit/gateway-eras.test.ts',
        title: "gives the server neither the retry's requestState and answers nor the 2026 envelope",
      },
    ],
  },
  {
    id: 'SERVE-JSON-ANSWER',
    statement:
      "serve answers a request with plain JSON only when its result is the first message for it; a confirmation, a server's request or progress that comes first turns the answer into a stream and reaches the client within the call, so no confirmation is dropped and a declined write changes nothing.",
    tests: [
      {
        file: 'integration/serve-json-answer.test.ts',
        title:
          'answers a call with plain JSON when nothing comes before its result; a confirmation turns the answer into a stream and is never dropped, and a declined write changes nothing',
      },
    ],
  },
  {
    id: 'MRTR-STATE-BOUNDED',
    statement:
      'What 2026 clients make hintbox hold for their confirmations is bounded: a requestState lives at most 10 minutes whatever approval.timeout says, nothing is kept of a redeemed state, expired ones are swept at most once a second (never per request), and at most 100 states per caller and 10,000 in all wait for an answer: past a cap the call is refused with one line and audited (approval.refused too-many).',
    tests: [
      {
        file: 'unit/request-state.test.ts',
        title:
          'keeps nothing of a redeemed state and stays linear under a flood of used states, yet refuses each replay',
      },
      {
        file: 'unit/request-state.test.ts',
        title: 'caps the life of a state at 10 minutes, whatever the approval timeout',
      },
      {
        file: 'unit/request-state.test.ts',
        title:
          'mints no state past the outstanding cap of a caller or of the process; a redeemed or expired one frees its place',
      },
      {
        file: 'unit/input-required-confirmation.test.ts',
        title: 'refuses a call with one line, audited, when its caller has as many confirmations waiting as it may',
      },
    ],
  },
  {
    id: 'MRTR-ONE-ENDPOINT',
    statement:
      "A 2026 client's retry through hintbox serve --one-endpoint reaches the member server's gateway with its requestState and answers, which redeems them as at /mcp/<server>: the approved retry runs once, its replay runs nothing.",
    tests: [
      {
        file: 'integration/input-required.test.ts',
        title:
          'carries a 2026 retry through serve --one-endpoint: input_required, the approved retry runs once, its replay nothing',
      },
    ],
  },
  {
    id: 'IMPORT-REWRITE-WORKS',
    statement:
      'hintbox import --rewrite points a client entry at hintbox only when its profile loads, its tools are listed in a read-only sandbox and each is approved with that definition; any other entry stays byte-identical, is named with why and the command that fixes it, the exit code is 1, and no container is left.',
    tests: [
      {
        file: 'integration/import-rewrite.test.ts',
        title:
          '--rewrite rewrites the approved entry that lists, leaves one that cannot list byte-identical, exit 1 naming it, no container left',
      },
      {
        file: 'integration/import-rewrite.test.ts',
        title: '--rewrite leaves an entry whose tools are not approved as it was, naming the approve command, exit 1',
      },
      {
        file: 'integration/import-rewrite.test.ts',
        title:
          '--rewrite leaves an entry whose listed tool differs from the approved one as it was, naming the tool, exit 1',
      },
    ],
  },
  {
    id: 'AUDIT-SINK-DB-GONE',
    statement:
      "The Postgres audit sink's database ending a session while a batch of log lines or checkpoints is in flight (a restart, an operator) never stops hintbox: no uncaught error, the client is dropped from the pool, and the next passes ship every line; a line whose session was ended is the database failing, not a line the database refused (shipped at the next pass, not held for a minute).",
    tests: [
      {
        file: 'integration/audit-sink.test.ts',
        title:
          'the database cutting the connection of a batch in flight (log or checkpoints) throws no uncaught error and loses no line (attack)',
      },
      {
        file: 'integration/audit-sink.test.ts',
        title:
          "hintbox serve goes on answering when the sink's database ends the session of a batch in flight (attack)",
      },
      {
        file: 'integration/audit-sink.test.ts',
        title:
          'a line whose session the database ended is the database failing, not a refused line: shipped at the next pass, not held (attack)',
      },
    ],
  },
  {
    id: 'SERVE-CLIENT-GONE',
    statement:
      'A client that abandons its calls (closes the connection before their answers) never stops hintbox serve: the answers written to the closed responses raise nothing, and its session goes on answering.',
    tests: [
      {
        file: 'integration/serve-json-answer.test.ts',
        title: 'a client that abandons its calls before their JSON answers, 60 times, never stops serve (attack)',
      },
    ],
  },
  {
    id: 'K8S-FREEZE',
    statement:
      "On Kubernetes a held writer is frozen between calls by its gate, PID 1 of the Pod's container, commanded over the attach in frames the server cannot write or answer: every byte of the server's stdout reaches hintbox inside the gate's data frames, so a server printing the gate's answers neither forges a freeze nor escapes one. The gate runs as the server's own uid (the Pod's runAsUser) and is not dumpable: the server cannot read its environment, descriptors or memory, and its signals to PID 1 are dropped.",
    tests: [
      {
        file: 'integration/kubernetes-run.test.ts',
        title:
          "keeps a held writer's Pod frozen between calls, even when its server prints the gate's answers or attacks the gate as its uid",
      },
      {
        file: 'unit/kubernetes-engine.test.ts',
        title: 'a released sandbox freezes through its gate over the attach: its server answers nothing until thawed',
      },
      {
        file: 'unit/gate-frames.test.ts',
        title: "a server that prints the gate's answers and frames only ever sends data: no answer is forged",
      },
    ],
  },
  {
    id: 'SERVE-STANDARD-HEADERS',
    statement:
      'A 2026 request to hintbox serve whose MCP-Protocol-Version, Mcp-Method or Mcp-Name header is missing or disagrees with its body is refused whole (HTTP 400, JSON-RPC -32020): nothing of it reaches a gateway, nothing runs, no call is recorded, so a filter that trusts the headers cannot be walked past; a 2026 request that carries an Mcp-Session-Id is checked the same (it is served without a session, the id ignored). A base64-wrapped Mcp-Name must be strict base64 of UTF-8 (the standard alphabet, exact padding, re-encoding to itself), so no two header values decode to the same name.',
    tests: [
      {
        file: 'unit/serve-session-headers.test.ts',
        title: 'refuses a batch holding a 2026 request, or carrying the headers, and runs nothing (attack)',
      },
      {
        file: 'unit/serve-session-headers.test.ts',
        title:
          'refuses a 2025 request whose Mcp-Method or Mcp-Name says another request than its body, and runs nothing (attack)',
      },
      {
        file: 'unit/standard-headers.test.ts',
        title:
          'refuses an Mcp-Name whose base64 is not strict: other header bytes never decode to the same name (attack)',
      },
      {
        file: 'unit/serve-session-headers.test.ts',
        title:
          'is refused (400, -32020) when its Mcp-Method says another method than its body, and nothing runs (attack)',
      },
      {
        file: 'integration/serve-stateless.test.ts',
        title:
          'refuses a 2026 request whose Mcp-Method or Mcp-Name header is missing or says another call than its body (400, -32020): the write runs nothing and no call is recorded (attack)',
      },
      {
        file: 'unit/standard-headers.test.ts',
        title: 'refuses each header missing or naming another call than the body, naming which',
      },
    ],
  },
  {
    id: 'SERVE-STATELESS-BINDING',
    statement:
      "hintbox serve answers a 2026 client without a session through one gateway per authenticated principal and profile, and a confirmation's requestState redeems only for the principal and the profile it was minted for: retried by another principal (a valid token) or on another profile it is refused, runs nothing, is audited, and is not used up.",
    tests: [
      {
        file: 'integration/serve-stateless.test.ts',
        title:
          'refuses a requestState retried by another principal or on another profile: nothing is written, each refusal audited (attack)',
      },
      {
        file: 'integration/serve-stateless.test.ts',
        title:
          'serves the SDK 2.x client over HTTP without a session: lists, a confirmed write as input_required that runs once, its replay nothing, the gateway ended when idle',
      },
    ],
  },
  {
    id: 'UPSTREAM-2026-HINTS',
    statement:
      'A 2026-era server (probed with server/discover, spoken to in 2026) is pinned, planned and confirmed exactly as a 2025 server: its tool claiming readOnlyHint that writes fails with EROFS and the file stays byte-identical; a write is asked by hintbox before the server sees it.',
    tests: [
      {
        file: 'integration/protocol-pairings.test.ts',
        title:
          'runs a 2026 server for a 2025 client: tools, prompts, completions, resources, confirmation, its input request, progress, cancellation; its lie about readOnlyHint meets EROFS',
      },
    ],
  },
  {
    id: 'UPSTREAM-2026-INPUT-NO-ELICIT',
    statement:
      "A 2026 server's input_required reaches the client only as a server's elicitation under hintbox's policy for them; when the client cannot be asked, the call fails with an error naming input_required and nothing is retried.",
    tests: [
      {
        file: 'integration/protocol-pairings.test.ts',
        title: 'fails the call of a 2026 server that asks a 2025 client without elicitation for input, saying why',
      },
    ],
  },
  {
    id: 'UPSTREAM-2026-INPUT-STATE',
    statement:
      "The retry of a 2026 server's request after input_required carries the answers and the server's requestState byte for byte, under the same request, and a server may ask at most 16 rounds in one request; only a tool call's questions are passed on, and only while it is the only call at the server (so a question cannot be bound to another call, another caller's), and a client's own requestState or inputResponses never reach the server.",
    tests: [
      {
        file: 'unit/modern-upstream-transport.test.ts',
        title:
          'never passes a client’s own requestState or inputResponses to a 2026 server: only hintbox’s retry carries them (attack)',
      },
      {
        file: 'unit/modern-upstream-transport.test.ts',
        title:
          'passes no question that could reach another call: a read’s, or one of several tool calls at the server (attack)',
      },
      {
        file: 'unit/modern-upstream-transport.test.ts',
        title:
          'passes an input_required up as the server’s own question and retries with the answer and the state untouched',
      },
      {
        file: 'unit/modern-upstream-transport.test.ts',
        title:
          'refuses a server that asks more than MAX_INPUT_ROUNDS times in one request, and a request of its own under a question’s id',
      },
    ],
  },
  {
    id: 'UPSTREAM-PROBE-BOUND',
    statement:
      'A server that never answers the server/discover probe cannot hold a sandbox start: the probe ends after at most min(5 s, half of timeouts.start), and initialize has the rest of the bound.',
    tests: [
      {
        file: 'unit/modern-upstream-transport.test.ts',
        title:
          'does not let a server that never answers server/discover hold the start: the probe ends at half the start bound',
      },
    ],
  },
  {
    id: 'MRTR-SERVER-INPUT',
    statement:
      "A 2025 server's elicitation or sampling during a 2026 client's call reaches that client as input_required (hintbox's approval first, in a round of its own), under the same rules as for a 2025 client (a client whose envelope declares no elicitation gets the server refused as a 2025 client without it), and the call it was asked in runs once, going on with the retry's answer.",
    tests: [
      {
        file: 'integration/server-input-rounds.test.ts',
        title:
          "asks a 2025 server's elicitation of a 2026 client as input_required and goes on with the same call, once",
      },
      {
        file: 'integration/server-input-rounds.test.ts',
        title: "asks hintbox's approval first, then the server's question, in two input_required rounds of one call",
      },
      {
        file: 'integration/server-input-rounds.test.ts',
        title: 'gives the server the error a 2025 client without elicitation gives when the 2026 client declared none',
      },
    ],
  },
  {
    id: 'MRTR-SERVER-INPUT-BOUND',
    statement:
      "A 2026 client's answer to a server's question reaches that server only with a requestState signed by this process, unexpired, not used before, and minted for that question of that pending call, caller, tool and arguments; any other retry answers nothing to the server, starts no call, is refused and audited.",
    tests: [
      {
        file: 'unit/server-input-rounds.test.ts',
        title:
          "uses up a withdrawn question's state: a server that asks and withdraws cannot fill its caller's outstanding states (attack)",
      },
      {
        file: 'integration/server-input-rounds.test.ts',
        title: "refuses an answer carried to another call's question, and answers nothing to that server (attack)",
      },
      {
        file: 'integration/server-input-rounds.test.ts',
        title: 'refuses the replay of an answer after its call finished, and sends the server nothing (attack)',
      },
      {
        file: 'unit/server-input-rounds.test.ts',
        title:
          "refuses another caller's answer to a question, with the victim's own state, and the server hears nothing (attack)",
      },
      {
        file: 'unit/server-input-rounds.test.ts',
        title: 'refuses other arguments, a forged, replayed or expired state, and a question withdrawn with its call',
      },
      {
        file: 'integration/server-input-rounds.test.ts',
        title: "ends a call whose server's question is not answered by timeouts.call, and refuses the late answer",
      },
      {
        file: 'integration/server-input-rounds.test.ts',
        title: "drops the answer of a call that answers while its question waits, and refuses the question's answer",
      },
    ],
  },
  {
    id: 'MRTR-SERVER-INPUT-LIMITS',
    statement:
      'A server may ask a 2026 client at most 16 questions in one call, counted over all its input_required rounds and forgotten when the call ends; a question unanswered when its requestState expires is withdrawn and its server gets a timeout; and a caller may have at most 8 calls parked on questions at once over all its gateways, the others refused to their servers and audited.',
    tests: [
      {
        file: 'unit/server-input-limits.test.ts',
        title:
          'refuses a server the 17th question of one call across input_required rounds, and keeps no count after the call (attack)',
      },
      {
        file: 'unit/server-input-limits.test.ts',
        title:
          "refuses a caller's 9th call parked on a server's question, over all its gateways, audited; another caller still parks (attack)",
      },
      {
        file: 'unit/server-input-rounds.test.ts',
        title:
          'withdraws a question nobody answers when its state expires: the server gets a timeout, the late answer nothing (attack)',
      },
    ],
  },
  {
    id: 'SERVE-STATELESS-ERA',
    statement:
      'A 2026 request to hintbox serve (its _meta names 2026-07-28) is served without a session: one that asks for initialize is refused (HTTP 404, JSON-RPC -32601, naming the versions served), no gateway opens for it and no session is minted; an Mcp-Session-Id it carries is ignored and never echoed, so it cannot take a 2025 session path that checks fewer headers.',
    tests: [
      {
        file: 'unit/serve-session-headers.test.ts',
        title:
          'is served statelessly, the id ignored: without the 2026 headers it is refused and nothing runs; with them it runs on the caller gateway, no id echoed (attack)',
      },
      {
        file: 'integration/serve-stateless.test.ts',
        title:
          'refuses a 2026 initialize on the stateless path (404, -32601, naming the versions served): no gateway opens, no session is minted (attack)',
      },
    ],
  },
  {
    id: 'SERVE-READY-LOCK',
    statement:
      'hintbox serve reports a server with approved tools ready from its lock file before its sandboxes start, but runs no call of it before the running server is verified against that lock file: a tool that differs from its locked definition is refused and audited, nothing reaches the server, and /readyz is not ready (the server differs-from-lock), as it is for a server that lists a tool its lock file does not have or no longer lists an approved one, and for one that cannot be verified (failed); /readyz?verified counts a server, clients: separate ones included, only once it was verified against its lock file.',
    tests: [
      {
        file: 'integration/serve-ready.test.ts',
        title:
          'is ready from the lock file before its sandboxes start; a server whose definitions differ from its lock never gets the call, is audited, and makes /readyz not ready (attack)',
      },
      {
        file: 'integration/serve-ready.test.ts',
        title:
          'verifies a clients: separate server against its lock before /readyz?verified counts it; one whose image differs, or that cannot start, is not ready, nor is one whose client session differs (attack)',
      },
      {
        file: 'integration/serve-ready.test.ts',
        title:
          'counts a tool the lock file does not have, and an approved tool the server no longer lists, as a difference (attack)',
      },
    ],
  },
];
