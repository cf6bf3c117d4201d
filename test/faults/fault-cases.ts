import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import path from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { stringify } from 'yaml';
import { LABEL_OWNER_PID, LABEL_PREVIEW, LABEL_SESSION } from '../../src/engine/sandbox-labels.js';
import pg from 'pg';
import { parseRoleComment, ROLE_PREFIX } from '../../src/database/role-grants.js';
import {
  DBLIAR_IMAGE,
  docker,
  ensureDatabaseFixtureImage,
  eventually,
  FAULTY_IMAGE,
  ownHintboxProcess,
} from '../integration/support/docker.js';
import { startPostgres } from '../integration/support/postgres.js';
import {
  auditOf,
  HINTBOX_BIN,
  hintboxCommand,
  hintboxTestEnv,
  runHintbox,
  sandboxFolder,
  writeProfile,
} from '../integration/support/hintbox-process.js';
import { connect, leave, serve, stop } from '../integration/support/serve-process.js';
import { fillFileSystem } from '../support/fill-disk.js';
import { scratchFolder } from '../support/scratch-folder.js';
import { CHECKPOINTS_FILE } from '../../src/audit/audit-checkpoint.js';

/**
 * The fault cases of issue 17, each run `runs` times: by `npm test` in their short form
 * (test/integration/faults.test.ts) and by `npm run faults` in their long one (run-faults.ts),
 * which prints the table docs/reliability.md carries. Every case drives the real
 * hintbox bin against real containers (the `faulty` fixture server) and counts, per run, what
 * it promises not to do: fail, lose an audit record, leave something behind.
 */

export interface CaseResult {
  case: string;
  runs: number;
  /** Runs in which a promise was broken (each says how in `problems`). */
  failures: number;
  /** Calls the server received that have no intent in the audit log. */
  recordsLost: number;
  /** Containers, networks and temp folders of the case's runs found after it. */
  leftovers: number;
  problems: string[];
  /** Figures worth printing (calls per second, memory). */
  figures: Record<string, number>;
}

/** A small seeded generator (mulberry32): the same seed, the same kill points. */
export function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const between = (random: () => number, low: number, high: number): number =>
  Math.floor(low + random() * (high - low + 1));

function faultyProfile(name: string, workspace: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    name,
    server: { image: FAULTY_IMAGE },
    trust: 'trusted',
    mounts: [{ source: workspace, target: '/data' }],
    network: 'none',
    limits: { memory: '128m', pids: 64 },
    tools: { record: { approval: 'allow' } },
    ...extra,
  };
}

/** What a dead run left: its containers and networks (by owner pid), its temp folders. */
async function leftoversOf(pid: number, tmp: string): Promise<string[]> {
  const { docker: d } = await docker();
  const filters = { label: [LABEL_SESSION, `${LABEL_OWNER_PID}=${pid}`] };
  const containers = (await d.listContainers({ all: true, filters })).map((c) => `container ${c.Names[0]}`);
  const networks = (await d.listNetworks({ filters })).map((n) => `network ${n.Name}`);
  const folders = readdirSync(tmp)
    .filter((f) => f.startsWith('hintbox-'))
    .map((f) => `folder ${f}`);
  return [...containers, ...networks, ...folders];
}

/** The `n` of every call the server received (`record` writes /data/call-<n>.txt first). */
function received(workspace: string): number[] {
  return readdirSync(workspace)
    .map((f) => /^call-(\d+)\.txt$/.exec(f)?.[1])
    .filter((n): n is string => n !== undefined)
    .map(Number);
}

export type CrashPhase = 'starting' | 'calls' | 'confirmation' | 'preview' | 'teardown';
/** The phases `crashAnywhere` takes in turn ('preview' is a case of its own: {@link crashDuringPreview}). */
export const CRASH_PHASES: readonly CrashPhase[] = ['starting', 'calls', 'confirmation', 'teardown'];

/** How long the dry run of a previewed call takes (the preview gives it 10 s): the kill lands in it. */
const PREVIEW_CALL_MS = 6000;

/**
 * hintbox killed with SIGKILL at a random point of one phase of a session. After the next
 * start's sweep nothing of the dead run may be left, every call the server received must have
 * its intent in the audit log, and `audit verify` must pass.
 */
export async function crashAnywhere(
  runs: number,
  seed: number,
  phases: readonly CrashPhase[] = CRASH_PHASES,
  caseName = 'crash anywhere (SIGKILL)',
): Promise<CaseResult> {
  const random = seeded(seed);
  const result = emptyResult(caseName, runs);
  const killed: number[] = [];
  for (let i = 0; i < runs; i++) {
    const phase = phases[i % phases.length]!;
    const workspace = sandboxFolder('hintbox-faults-');
    const tmp = scratchFolder('hintbox-faults-tmp-');
    const name = `faulty-crash-${process.pid}-${phase}-${i}`;
    const asks = phase === 'confirmation' || phase === 'preview';
    const confirm = asks ? { tools: { record: { approval: 'confirm' } } } : {};
    const profile = writeProfile(faultyProfile(name, workspace, confirm));
    const env = { TMPDIR: tmp };
    let pid = 0;
    try {
      const seen = new Set<string>();
      pid = await killDuring(phase, profile, env, random, tmp, seen);
      killed.push(pid);
      if (phase === 'preview') {
        const key = seen.has('preview sandbox up') ? 'killed with its sandbox up' : 'killed before its sandbox ran';
        result.figures[key] = (result.figures[key] ?? 0) + 1;
      }
      const swept = await hintboxCommand(['sweep'], env);
      if (swept.code !== 0) result.problems.push(`run ${i} (${phase}): sweep exited ${swept.code}: ${swept.stderr}`);
      const left = await leftoversOf(pid, tmp);
      const audited = new Set(
        (await auditOf<{ arguments: { n?: number } }>(name, { all: true }))
          .map((r) => r.arguments.n)
          .filter((n) => n !== undefined),
      );
      const lost = received(workspace).filter((n) => !audited.has(n));
      result.recordsLost += lost.length;
      result.leftovers += left.length;
      if (lost.length > 0 || left.length > 0) {
        result.failures++;
        result.problems.push(
          `run ${i} (${phase}): ${lost.length} calls without an intent, left: ${left.join(', ') || 'nothing'}`,
        );
      }
    } catch (error) {
      result.failures++;
      result.problems.push(`run ${i} (${phase}): ${(error as Error).message}`);
    }
  }
  const verify = await hintboxCommand(['audit', 'verify']);
  if (verify.code !== 0) {
    result.failures++;
    result.problems.push(`audit verify exited ${verify.code}: ${verify.stdout.slice(-500)}`);
  }
  // A killed run's records after its last signed checkpoint are reported as not yet covered (and
  // verify passes up to it): at least one kill must leave such a window, or this proves nothing.
  const windows = killed.filter((pid) =>
    new RegExp(`-${pid}-[0-9a-f]{8}\\.\\d{6}\\.jsonl:\\d+: \\d+ record\\(s\\) from here on .*NOT YET COVERED`).test(
      verify.stdout,
    ),
  );
  result.figures['killed runs with records after their last checkpoint'] = windows.length;
  if (killed.length > 0 && windows.length === 0) {
    result.failures++;
    result.problems.push(`no killed run was reported with records not yet covered: ${verify.stdout.slice(-500)}`);
  }
  return result;
}

/**
 * A kill while a confirmed call's preview runs: its dry run in a throwaway sandbox (label
 * hintbox.preview=1) over copies of the writable mounts (`hintbox-preview-<pid>-*` in hintbox's
 * temp folder). After the next start's sweep neither may be left, and the audit promises hold.
 */
export function crashDuringPreview(runs: number, seed: number): Promise<CaseResult> {
  return crashAnywhere(runs, seed, ['preview'], 'crash during a preview (SIGKILL)');
}

/**
 * hintbox killed with SIGKILL in a session whose sandboxes reach Postgres (a profile with a
 * database section, a real Postgres 15 of the case's own): while it starts (discovery has a role
 * of its own) or during calls that insert rows. After `hintbox sweep <profile>` no role of the
 * dead run may be left in pg_roles (nor any hintbox role: this Postgres is the case's), no relay
 * folder (`hintbox-pg-<pid>-…`), container or network; every row a call inserted must have its
 * call's intent in the audit log.
 */
export async function crashWithDatabase(runs: number, seed: number): Promise<CaseResult> {
  const random = seeded(seed);
  const result = emptyResult('crash with database roles (SIGKILL)', runs);
  await ensureDatabaseFixtureImage();
  await using postgres = await startPostgres();
  const setup = new pg.Client({ connectionString: postgres.adminUrl });
  await setup.connect();
  await setup.query('CREATE DATABASE shop');
  await setup.end();
  const admin = new pg.Client({ connectionString: postgres.adminUrl.replace(/\/postgres$/, '/shop') });
  await admin.connect();
  try {
    await admin.query('CREATE SCHEMA shop; CREATE TABLE shop.items (id serial PRIMARY KEY, name text NOT NULL)');
    const name = `dbliar-crash-${process.pid}`;
    const profile = writeProfile({
      name,
      server: { image: DBLIAR_IMAGE },
      trust: 'trusted',
      network: 'none',
      database: { adminUrlEnv: 'HINTBOX_FAULTS_PG_ADMIN', database: 'shop', schemas: ['shop'], privilege: 'write' },
      limits: { pids: 64, memory: '128m' },
      tools: { add_item: { approval: 'allow' } },
    });
    const adminEnv = { HINTBOX_FAULTS_PG_ADMIN: postgres.adminUrl };
    const prepared = await hintboxCommand(['db', 'prepare', profile], adminEnv);
    if (prepared.code !== 0) throw new Error(`db prepare exited ${prepared.code}: ${prepared.stderr}`);
    /** hintbox's roles on this Postgres, with the pid their comment names. */
    const roles = async (): Promise<{ name: string; pid: number | undefined }[]> =>
      (
        await admin.query<{ name: string; comment: string | null }>(
          `SELECT rolname AS name, shobj_description(oid, 'pg_authid') AS comment FROM pg_roles
           WHERE left(rolname, length($1)) = $1`,
          [ROLE_PREFIX],
        )
      ).rows.map((r) => ({ name: r.name, pid: parseRoleComment(r.comment)?.pid }));
    for (let i = 0; i < runs; i++) {
      const phase = (['starting', 'calls'] as const)[i % 2];
      const tmp = scratchFolder('hintbox-faults-tmp-');
      const env = { ...adminEnv, TMPDIR: tmp };
      try {
        const pid = await (phase === 'starting'
          ? killWhileStarting(profile, env, random, 4000)
          : killDuringInserts(profile, env, random, i, async (pid) => (await roles()).some((r) => r.pid === pid)));
        // What the kill left for the sweep (the control that this case is not vacuous).
        const orphans = (await roles()).filter((r) => r.pid === pid).length;
        result.figures['roles left by the kills'] = (result.figures['roles left by the kills'] ?? 0) + orphans;
        const swept = await hintboxCommand(['sweep', profile], env);
        if (swept.code !== 0) result.problems.push(`run ${i} (${phase}): sweep exited ${swept.code}: ${swept.stderr}`);
        const left = [
          ...(await leftoversOf(pid, tmp)),
          ...(await roles()).map((r) => `role ${r.name}${r.pid === pid ? ' (of the dead run)' : ''}`),
        ];
        const audited = new Set(
          (await auditOf<{ arguments: { sql?: string } }>(name, { all: true }))
            .map((r) => /'(run-\d+-\d+)'/.exec(r.arguments.sql ?? '')?.[1])
            .filter((n) => n !== undefined),
        );
        const inserted = (
          await admin.query<{ name: string }>(`SELECT name FROM shop.items WHERE name LIKE $1`, [`run-${i}-%`])
        ).rows.map((r) => r.name);
        const lost = inserted.filter((n) => !audited.has(n));
        result.recordsLost += lost.length;
        result.leftovers += left.length;
        if (lost.length > 0 || left.length > 0) {
          result.failures++;
          result.problems.push(
            `run ${i} (${phase}): ${lost.length} rows without an intent, left: ${left.join(', ') || 'nothing'}`,
          );
        }
      } catch (error) {
        result.failures++;
        result.problems.push(`run ${i} (${phase}): ${(error as Error).message}`);
      }
    }
  } finally {
    await admin.end().catch(() => undefined);
  }
  return result;
}

/** `hintbox run` given a client's first message, killed somewhere in its start; resolves with its pid once dead. */
async function killWhileStarting(
  profile: string,
  env: Record<string, string>,
  random: () => number,
  maxMs: number,
): Promise<number> {
  const child = spawn(HINTBOX_BIN, ['run', profile], {
    env: { ...hintboxTestEnv(), ...env },
    stdio: ['pipe', 'ignore', 'ignore'],
  });
  ownHintboxProcess(child.pid);
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.stdin.write(
    JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'faults', version: '1' } },
    }) + '\n',
  );
  await new Promise((r) => setTimeout(r, between(random, 100, maxMs)));
  child.kill('SIGKILL');
  await exited;
  return child.pid!;
}

/**
 * `hintbox run` of the database fixture, four workers inserting rows (`run-<i>-<n>`) through the
 * append role, killed after a random number of answers; `hasRole` is the control that the run
 * had a role to leave. Resolves with its pid once dead.
 */
async function killDuringInserts(
  profile: string,
  env: Record<string, string>,
  random: () => number,
  run: number,
  hasRole: (pid: number) => Promise<boolean>,
): Promise<number> {
  const hintbox = await runHintbox(profile, { env });
  let next = 0;
  let answered = 0;
  const worker = async (): Promise<void> => {
    for (;;) {
      const sql = `INSERT INTO shop.items (name) VALUES ('run-${run}-${next++}')`;
      const answer = await hintbox.client.callTool({ name: 'add_item', arguments: { sql } }).catch(() => undefined);
      if (answer === undefined) return;
      answered++;
    }
  };
  const workers = Array.from({ length: 4 }, () => worker());
  const killAfter = between(random, 2, 15);
  await eventually(async () => answered >= killAfter, 60_000, `${killAfter} answers`);
  if (!(await hasRole(hintbox.pid))) throw new Error('the run had no database role to leave (control)');
  process.kill(hintbox.pid, 'SIGKILL');
  await hintbox.exited;
  await hintbox.client.close().catch(() => undefined);
  await Promise.all(workers);
  return hintbox.pid;
}

/** Starts hintbox, drives it into `phase`, kills it there; resolves with its pid once it is dead. */
async function killDuring(
  phase: CrashPhase,
  profile: string,
  env: Record<string, string>,
  random: () => number,
  tmp: string,
  /** What the kill met, for the case's figures (a preview's sandbox up, or only its copy). */
  seen: Set<string>,
): Promise<number> {
  // A client's first message, then the kill somewhere in image check, discovery, sandbox starts.
  if (phase === 'starting') return killWhileStarting(profile, env, random, 3000);
  const asks = phase === 'confirmation' || phase === 'preview';
  const hintbox = await runHintbox(profile, { env, confirmations: asks ? 'never' : 'approve' });
  const kill = async (): Promise<number> => {
    process.kill(hintbox.pid, 'SIGKILL');
    await hintbox.exited;
    await hintbox.client.close().catch(() => undefined);
    return hintbox.pid;
  };
  const call = (n: number) =>
    hintbox.client
      .callTool({ name: 'record', arguments: { n, waitMs: between(random, 0, 30) } })
      .catch(() => undefined);
  if (phase === 'confirmation') {
    void call(0);
    await eventually(async () => hintbox.asked.length > 0, 30_000, 'the confirmation to be asked');
    await new Promise((r) => setTimeout(r, between(random, 0, 200)));
    return kill();
  }
  if (phase === 'preview') {
    // The confirmation's preview first copies the mount, then runs the call in its own sandbox:
    // the kill lands at a random point from the copy's folder appearing to the dry run's end.
    void hintbox.client
      .callTool({ name: 'record', arguments: { n: 0, waitMs: PREVIEW_CALL_MS } })
      .catch(() => undefined);
    const copying = () => readdirSync(tmp).some((f) => f.startsWith(`hintbox-preview-${hintbox.pid}-`));
    await eventually(async () => copying(), 30_000, 'the preview to begin');
    await new Promise((r) => setTimeout(r, between(random, 0, 2500)));
    if (hintbox.asked.length > 0) throw new Error('the preview was over before the kill: the kill point is wrong');
    const { docker: d } = await docker();
    const filters = { label: [`${LABEL_PREVIEW}=1`, `${LABEL_OWNER_PID}=${hintbox.pid}`] };
    if ((await d.listContainers({ filters })).length > 0) seen.add('preview sandbox up');
    return kill();
  }
  if (phase === 'teardown') {
    for (let n = 0; n < 3; n++) await call(n);
    void hintbox.client.close().catch(() => undefined); // the client leaves: hintbox tears down
    await new Promise((r) => setTimeout(r, between(random, 0, 500)));
    // (A teardown that ended before the kill is fine too: what it left is checked the same.)
    try {
      process.kill(hintbox.pid, 'SIGKILL');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
    }
    await hintbox.exited;
    return hintbox.pid;
  }
  // During calls: six in flight at a time, killed after a random number of answers. A worker
  // stops at its first failure (the kill): a loop of calls that fail at once would never yield.
  const killAfter = between(random, 3, 40);
  let next = 0;
  let answered = 0;
  const worker = async (): Promise<void> => {
    for (;;) {
      const answer = await call(next++);
      if (answer === undefined) return;
      answered++;
    }
  };
  const workers = Array.from({ length: 6 }, () => worker());
  await eventually(async () => answered >= killAfter, 60_000, `${killAfter} answers`);
  const pid = await kill();
  await Promise.all(workers);
  return pid;
}

/**
 * Sandbox faults: a server killed for memory, and one that stops reading its input. Each call is
 * answered with an error that names the cause, its audit record has an outcome, and the next call
 * is served by a fresh sandbox.
 */
export async function sandboxFaults(runs: number): Promise<CaseResult> {
  const result = emptyResult('sandbox killed for memory / stops reading', runs * 2);
  for (let i = 0; i < runs; i++) {
    for (const fault of ['eat_memory', 'stop_reading'] as const) {
      const workspace = sandboxFolder('hintbox-faults-');
      const name = `faulty-${fault.replace('_', '-')}-${process.pid}-${i}`;
      const profile = writeProfile(
        faultyProfile(name, workspace, { limits: { memory: '96m', pids: 64 }, timeouts: { call: 3 } }),
      );
      try {
        await using hintbox = await runHintbox(profile);
        const before = answerOf(await hintbox.client.callTool({ name: 'whoami', arguments: {} }));
        const text = await hintbox.client.callTool({ name: fault, arguments: {} }, undefined, { timeout: 60_000 }).then(
          (r) => JSON.stringify(r.content),
          (error: Error) => error.message,
        );
        const cause = fault === 'eat_memory' ? /killed for memory/ : /gave no answer within 3 s.*fresh one/;
        if (!cause.test(text)) throw new Error(`${fault}: the answer does not name the cause: ${text.slice(0, 300)}`);
        const after = answerOf(await hintbox.client.callTool({ name: 'whoami', arguments: {} }));
        if (JSON.stringify(after) === JSON.stringify(before))
          throw new Error(`${fault}: the next call met the same sandbox`);
        const records = await auditOf<{ tool: string; outcome: string | null }>(name, { all: true });
        const record = records.find((r) => r.tool === fault);
        if (!record?.outcome || record.outcome === 'ok')
          throw new Error(`${fault}: audit outcome ${String(record?.outcome)}`);
      } catch (error) {
        result.failures++;
        result.problems.push(`run ${i}: ${(error as Error).message}`);
      }
    }
  }
  return result;
}

/**
 * The Docker engine restarted mid-session (dockerd stopped with SIGTERM and started again with
 * the same command line: every container of the engine stops). A call while it is down fails
 * with an error, not a hang; once it is back, the session recovers: the next call is served by a
 * fresh sandbox. Then hintbox exits and leaves nothing. Restarts the engine of this machine: run
 * only where nothing else uses it (opt-in in run-faults.ts).
 */
export async function engineRestart(runs: number): Promise<CaseResult> {
  const result = emptyResult('Docker engine restarted mid-session', runs);
  for (let i = 0; i < runs; i++) {
    const name = `faulty-engine-${process.pid}-${i}`;
    let pid = 0;
    try {
      const hintbox = await runHintbox(writeProfile(faultyProfile(name, sandboxFolder('hintbox-faults-'))));
      pid = hintbox.pid;
      const echo = (n: number) =>
        hintbox.client.callTool({ name: 'echo', arguments: { n } }, undefined, { timeout: 90_000 }).then(
          (r) => (r.isError ? `error ${JSON.stringify(r.content)}` : String((answerOf(r) as { n?: number })?.n)),
          (error: Error) => `error ${error.message}`,
        );
      if ((await echo(1)) !== '1') throw new Error('the first call failed');
      const argv = await stopEngine();
      // Its containers stopped with it: the call fails (the sandbox died, or no engine to start one).
      const whileDown = await echo(2);
      await startEngine(argv);
      if (!whileDown.startsWith('error'))
        result.problems.push(`run ${i}: a call while the engine was down answered ${whileDown}`);
      let back = '';
      await eventually(async () => (back = await echo(3)) === '3', 60_000, 'a call to work again').catch(() => {
        throw new Error(`no call worked once the engine was back: ${back}`);
      });
      await hintbox[Symbol.asyncDispose]();
      const left = await leftoversOf(pid, scratchFolder('hintbox-faults-empty-'));
      result.leftovers += left.length;
      if (left.length > 0) result.problems.push(`run ${i}: left ${left.join(', ')}`);
    } catch (error) {
      result.problems.push(`run ${i}: ${(error as Error).message}`);
    }
  }
  result.failures = new Set(result.problems.map((p) => p.split(':')[0])).size;
  return result;
}

/** Stops this machine's dockerd (SIGTERM; its containers stop with it); resolves with its command line. */
async function stopEngine(): Promise<string[]> {
  const pid = Number(execFileSync('pgrep', ['-o', '-x', 'dockerd']).toString().trim());
  const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  process.kill(pid, 'SIGTERM');
  await eventually(async () => !existsSync(`/proc/${pid}`), 60_000, 'dockerd to stop');
  return argv;
}

/** Starts dockerd again as it was; resolves once it answers. */
async function startEngine(argv: string[]): Promise<void> {
  const child = spawn(argv[0]!, argv.slice(1), { detached: true, stdio: 'ignore' });
  child.unref();
  const { docker: d } = await docker();
  await eventually(
    () =>
      d.ping().then(
        () => true,
        () => false,
      ),
    60_000,
    'dockerd to answer again',
  );
}

/**
 * The audit folder's disk full (a real tmpfs of 256 KiB; needs root to mount it): a call is
 * refused and not forwarded (the server never sees it), and calls work again once there is room.
 */
export async function auditDiskFull(runs: number): Promise<CaseResult> {
  const result = emptyResult('audit folder disk full', runs);
  for (let i = 0; i < runs; i++) {
    const auditDir = scratchFolder('hintbox-faults-audit-');
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=256k,mode=0700', 'tmpfs', auditDir]);
    try {
      const workspace = sandboxFolder('hintbox-faults-');
      const name = `faulty-disk-${process.pid}-${i}`;
      const env = { HINTBOX_AUDIT_DIR: auditDir };
      await using hintbox = await runHintbox(writeProfile(faultyProfile(name, workspace)), { env });
      const record = async (n: number): Promise<string> =>
        JSON.stringify((await hintbox.client.callTool({ name: 'record', arguments: { n } })).content);
      await record(1);
      const filler = fillFileSystem(auditDir);
      // The log file's last page may still hold a line or two after the disk is full: calls go
      // on (recorded) until one meets the full disk, and that one must be refused.
      let refusedAt: number | undefined;
      let answer = '';
      for (let n = 2; n < 60 && refusedAt === undefined; n++) {
        answer = await record(n);
        if (/the audit trail cannot record it/.test(answer)) refusedAt = n;
      }
      const forwarded = refusedAt !== undefined && existsSync(path.join(workspace, `call-${refusedAt}.txt`));
      rmSync(filler);
      await record(100);
      const problems = [
        ...(refusedAt !== undefined ? [] : [`no call was refused on the full disk; the last answer: ${answer}`]),
        ...(forwarded ? [`the refused call ${refusedAt} reached the server`] : []),
        ...(existsSync(path.join(workspace, 'call-100.txt')) ? [] : ['no call worked again once there was room']),
      ];
      const audited = new Set(
        (await auditOf<{ arguments: { n?: number } }>(name, { all: true, env }))
          .map((r) => r.arguments.n)
          .filter((n) => n !== undefined),
      );
      const lost = received(workspace).filter((n) => !audited.has(n));
      result.recordsLost += lost.length;
      if (lost.length > 0) problems.push(`calls without an intent: ${lost.join(', ')}`);
      if (problems.length > 0) {
        result.failures++;
        result.problems.push(...problems.map((p) => `run ${i}: ${p}`));
      }
    } catch (error) {
      result.failures++;
      result.problems.push(`run ${i}: ${(error as Error).message}`);
    } finally {
      execFileSync('umount', ['-l', auditDir]);
    }
  }
  return result;
}

/**
 * Load: `calls` calls at once across 8 clients of `hintbox serve` and 2 servers. Every answer
 * must reach the call that made it (each carries its own number back), none may be lost, and
 * serve's memory must stay bounded. Reports calls per second and serve's RSS.
 */
export async function load(calls: number): Promise<CaseResult> {
  const result = emptyResult(`load: ${calls} calls at once, 8 clients, 2 servers`, 1);
  const folder = scratchFolder('hintbox-faults-serve-');
  const servers = [`faulty-load-a-${process.pid}`, `faulty-load-b-${process.pid}`];
  for (const server of servers) {
    const profile = faultyProfile(server, sandboxFolder('hintbox-faults-'));
    writeFileSync(path.join(folder, `${server}.yaml`), stringify(profile));
  }
  const serving = await serve([folder]);
  const clients: Client[] = [];
  try {
    for (let c = 0; c < 8; c++) clients.push(await connect(`${serving.url}/mcp/${servers[c % 2]}`));
    // Warm: each server's sandbox started before the clock runs.
    for (const client of clients.slice(0, 2)) await client.callTool({ name: 'echo', arguments: { n: -1 } });
    const rssBefore = rssOf(serving.child.pid!);
    const started = performance.now();
    const wrong: string[] = [];
    let lost = 0;
    await Promise.all(
      Array.from({ length: calls }, async (_, n) => {
        const client = clients[n % clients.length]!;
        try {
          const answer = answerOf(
            await client.callTool({ name: 'echo', arguments: { n, waitMs: n % 20 } }, undefined, { timeout: 120_000 }),
          );
          const got = (answer as { n?: number } | undefined)?.n;
          if (got !== n) wrong.push(`call ${n} got ${String(got)}`);
        } catch (error) {
          lost++;
          if (lost <= 3) result.problems.push(`call ${n}: ${(error as Error).message}`);
        }
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    const rssAfter = rssOf(serving.child.pid!);
    result.figures = {
      'calls/s': Math.round(calls / seconds),
      'serve RSS before (MB)': Math.round(rssBefore / 1e6),
      'serve RSS after (MB)': Math.round(rssAfter / 1e6),
    };
    if (wrong.length > 0)
      result.problems.push(`${wrong.length} answers reached the wrong call: ${wrong.slice(0, 3).join('; ')}`);
    if (lost > 0) result.problems.push(`${lost} calls got no answer`);
    // Bounded: well above the ~70 MB serve takes at rest (BENCHMARKS.md), far below a leak's growth.
    if (rssAfter > 400e6) result.problems.push(`serve grew to ${Math.round(rssAfter / 1e6)} MB`);
    if (result.problems.length > 0) result.failures = 1;
  } finally {
    for (const client of clients) await leave(client).catch(() => undefined);
    await stop(serving);
  }
  const left = await leftoversOf(serving.child.pid!, scratchFolder('hintbox-faults-empty-'));
  result.leftovers = left.length;
  if (left.length > 0) {
    result.failures = 1;
    result.problems.push(`left after serve stopped: ${left.join(', ')}`);
  }
  return result;
}

/**
 * The Postgres audit sink down under load: calls flow from 4 clients of `hintbox serve` (2
 * servers) while the sink's Postgres is stopped for `downSeconds` (its container stopped, as an
 * operator's database goes down, and started again on the same port). Calls must go on being
 * answered while it is down (the log, not the sink, is the record), and once it is back every
 * line of the local audit log must reach the sink: first while serve runs (its loop catches up,
 * whatever its backoff), then after serve stopped; so must every signed checkpoint line, and
 * `hintbox audit verify --sink` must hold the folder against them.
 */
export async function sinkDownUnderLoad(downSeconds: number): Promise<CaseResult> {
  const result = emptyResult(`Postgres audit sink down ${downSeconds} s under load, 4 clients`, 1);
  await using postgres = await startPostgres({ hostPort: await freePort() });
  const { docker: d } = await docker();
  const container = d.getContainer(postgres.container.getId());
  /** The texts of a sink table's rows; a new connection each time (the database goes away). */
  const shipped = async (table: 'audit_log' | 'audit_checkpoints' = 'audit_log'): Promise<Set<string>> => {
    const db = new pg.Client({ connectionString: postgres.adminUrl, connectionTimeoutMillis: 5000 });
    db.on('error', () => undefined); // stopped under it: the query fails, nothing uncaught
    await db.connect();
    try {
      const exists = await db.query(`SELECT to_regclass('hintbox.${table}') AS t`);
      if ((exists.rows[0] as { t: string | null }).t === null) return new Set();
      return new Set((await db.query<{ text: string }>(`SELECT text FROM hintbox.${table}`)).rows.map((r) => r.text));
    } finally {
      await db.end().catch(() => undefined);
    }
  };
  const auditDir = scratchFolder('hintbox-faults-sink-audit-');
  const missing = async (): Promise<string[]> => {
    const rows = await shipped();
    return localAuditLines(auditDir).filter((line) => !rows.has(line));
  };
  /** The folder's signed checkpoint lines not in the sink. */
  const missingCheckpoints = async (): Promise<string[]> => {
    const rows = await shipped('audit_checkpoints');
    return readFileSync(path.join(auditDir, CHECKPOINTS_FILE), 'utf8')
      .split('\n')
      .filter((line) => line !== '' && !rows.has(line));
  };
  const folder = scratchFolder('hintbox-faults-serve-');
  const servers = [`faulty-sink-a-${process.pid}`, `faulty-sink-b-${process.pid}`];
  for (const server of servers) {
    writeFileSync(
      path.join(folder, `${server}.yaml`),
      stringify(faultyProfile(server, sandboxFolder('hintbox-faults-'))),
    );
  }
  const serving = await serve([folder], { HINTBOX_DATABASE_URL: postgres.adminUrl, HINTBOX_AUDIT_DIR: auditDir });
  const clients: Client[] = [];
  let stopping = false;
  let answered = 0;
  const failed: string[] = [];
  try {
    for (let c = 0; c < 4; c++) clients.push(await connect(`${serving.url}/mcp/${servers[c % 2]}`));
    const worker = async (client: Client, c: number): Promise<void> => {
      for (let n = c * 1_000_000; !stopping; n++) {
        try {
          const answer = answerOf(
            await client.callTool({ name: 'echo', arguments: { n, waitMs: 5 } }, undefined, { timeout: 30_000 }),
          );
          if ((answer as { n?: number } | undefined)?.n !== n) failed.push(`call ${n} got ${JSON.stringify(answer)}`);
          else answered++;
        } catch (error) {
          failed.push(`call ${n}: ${(error as Error).message}`);
        }
      }
    };
    const workers = clients.map((client, c) => worker(client, c));
    // The control: the sink ships while its database is up.
    await eventually(async () => (await shipped()).size > 0, 30_000, 'the sink to ship its first lines');
    await new Promise((r) => setTimeout(r, 1000));
    await container.stop({ t: 10 }); // STOPSIGNAL SIGINT: a fast shutdown, its sessions cut
    const downAt = performance.now();
    const answeredBefore = answered;
    await new Promise((r) => setTimeout(r, downSeconds * 1000));
    const whileDown = answered - answeredBefore;
    const downFor = (performance.now() - downAt) / 1000;
    await container.start();
    await eventually(
      () =>
        shipped().then(
          () => true,
          () => false,
        ),
      60_000,
      'Postgres to answer again',
    );
    const backAt = performance.now();
    await new Promise((r) => setTimeout(r, 2000)); // calls go on once it is back too
    stopping = true;
    await Promise.all(workers);
    let left: string[] = [];
    let leftCheckpoints: string[] = [];
    // The sink's backoff reaches 30 s: it must catch up within one more step of it and its shipping.
    await eventually(
      async () => (left = await missing()).length === 0 && (leftCheckpoints = await missingCheckpoints()).length === 0,
      90_000,
      'the sink to catch up',
    ).catch(() => {
      result.problems.push(
        `${left.length} lines of the local log and ${leftCheckpoints.length} of its checkpoints not in the sink 90 s after it returned`,
      );
    });
    result.figures = {
      'calls answered while down': whileDown,
      'calls/s while down': Math.round(whileDown / downFor),
      'caught up after (s)': Math.round((performance.now() - backAt) / 100) / 10,
      'lines shipped': localAuditLines(auditDir).length,
    };
    if (whileDown === 0) result.problems.push('no call was answered while the sink was down');
  } finally {
    stopping = true;
    for (const client of clients) await leave(client).catch(() => undefined);
    await stop(serving);
  }
  // After serve stopped (its log closed, its sink's last pass done): still every line.
  const lost = await missing();
  result.recordsLost = lost.length;
  if (lost.length > 0) result.problems.push(`${lost.length} lines of the local log never reached the sink`);
  const checkpointsLost = await missingCheckpoints();
  if (checkpointsLost.length > 0) {
    result.problems.push(`${checkpointsLost.length} signed checkpoint lines never reached the sink`);
  }
  result.figures['checkpoints shipped'] = (await shipped('audit_checkpoints')).size;
  const verify = await hintboxCommand(['audit', 'verify', '--sink'], {
    HINTBOX_AUDIT_DIR: auditDir,
    HINTBOX_DATABASE_URL: postgres.adminUrl,
  });
  if (verify.code !== 0)
    result.problems.push(`audit verify --sink exited ${verify.code}: ${verify.stdout.slice(-500)}`);
  if (failed.length > 0) result.problems.push(`${failed.length} calls failed: ${failed.slice(0, 3).join('; ')}`);
  const leftover = await leftoversOf(serving.child.pid!, scratchFolder('hintbox-faults-empty-'));
  result.leftovers = leftover.length;
  if (leftover.length > 0) result.problems.push(`left after serve stopped: ${leftover.join(', ')}`);
  // Serve stops itself on an uncaught exception ('hintbox failed: <stack>'): never while the sink is down.
  if (/hintbox failed:/.test(serving.stderr())) result.problems.push('serve stopped on its own (hintbox failed)');
  if (result.problems.length > 0) {
    result.failures = 1;
    // The failure explains itself: what serve said last.
    result.problems.push(`serve's last stderr lines:\n${serving.stderr().split('\n').slice(-40).join('\n')}`);
  }
  return result;
}

/** Every whole line of the audit log files in `dir` (its records: the signed checkpoints are a file of their own). */
function localAuditLines(dir: string): string[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.jsonl') && f !== CHECKPOINTS_FILE)
    .flatMap((f) =>
      readFileSync(path.join(dir, f), 'utf8')
        .split('\n')
        .filter((line) => line !== ''),
    );
}

/** A TCP port free on the host now. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** What a tool of the faulty server answered (its structuredContent). */
function answerOf(result: unknown): unknown {
  return (result as { structuredContent?: unknown }).structuredContent;
}

function rssOf(pid: number): number {
  const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Number(kb ?? 0) * 1024;
}

function emptyResult(name: string, runs: number): CaseResult {
  return { case: name, runs, failures: 0, recordsLost: 0, leftovers: 0, problems: [], figures: {} };
}

/** The table `npm run faults` prints (Markdown, as docs/reliability.md carries it). */
export function faultTable(results: readonly CaseResult[]): string {
  const rows = results.map((r) => {
    const figures = Object.entries(r.figures)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ');
    return `| ${r.case} | ${r.runs} | ${r.failures} | ${r.recordsLost} | ${r.leftovers} | ${figures || '—'} |`;
  });
  return [
    '| case | runs | failures | records lost | leftovers | figures |',
    '| --- | ---: | ---: | ---: | ---: | --- |',
    ...rows,
  ].join('\n');
}
