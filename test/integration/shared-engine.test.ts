import { isProcessAlive } from '../../src/util/process-alive.js';
import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { before, it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import {
  LABEL_CLASS,
  LABEL_OWNER_HOST,
  LABEL_OWNER_PID,
  LABEL_SERVER,
  LABEL_SESSION,
} from '../../src/engine/sandbox-labels.js';
import { scratchFolder } from '../support/scratch-folder.js';
import {
  assertNoLeftoversWithin,
  containersOf,
  docker,
  ensureFaultyImage,
  eventually,
  FAULTY_IMAGE,
  REPO,
} from './support/docker.js';
import { HINTBOX_BIN, hintboxCommand, runHintbox, sandboxFolder, writeProfile } from './support/hintbox-process.js';

/**
 * Issue 17's shared engine: the suite's leftover checks look only at what its own hintbox
 * processes made. Here other sessions share the engine as a user's would — a `hintbox run`
 * started by their MCP client (another process, its own state folder, not known to the test
 * helpers), a hintbox in a container of its own with its sandbox, an unrelated container — and
 * the checks must pass while those run, leave them alone, and still catch the test's own leftover.
 * And a failing test leaves no folder in the temporary folder.
 */

const LABEL_HERE = 'hintbox-test.shared-engine';

function withoutTestContext(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(env).filter(([name]) => name !== 'NODE_TEST_CONTEXT'));
}

const faultyProfile = (name: string) => ({
  name,
  server: { image: FAULTY_IMAGE },
  trust: 'trusted',
  mounts: [{ source: sandboxFolder('hintbox-shared-'), target: '/data' }],
  network: 'none',
  limits: { memory: '128m', pids: 64 },
  tools: { record: { approval: 'allow' } },
});

/** A user's `hintbox run` as their MCP client launches it: newline-delimited JSON-RPC on its stdio. */
class ForeignSession {
  private buffer = '';
  private readonly waiting = new Map<number, (message: unknown) => void>();
  private nextId = 1;
  readonly exited: Promise<unknown>;

  constructor(readonly child: ChildProcessWithoutNullStreams) {
    child.stdout.on('data', (chunk: Buffer) => {
      this.buffer += chunk.toString('utf8');
      let at: number;
      while ((at = this.buffer.indexOf('\n')) >= 0) {
        const message = JSON.parse(this.buffer.slice(0, at)) as { id?: number };
        this.buffer = this.buffer.slice(at + 1);
        if (typeof message.id === 'number') this.waiting.get(message.id)?.(message);
      }
    });
    child.stderr.resume();
    this.exited = new Promise((resolve) => child.once('exit', resolve));
  }

  request(method: string, params: unknown): Promise<unknown> {
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.waiting.set(id, resolve);
      this.child.stdin.write(JSON.stringify({ jsonrpc: '2.0', id, method, params }) + '\n');
    });
  }

  call(name: string, args: Record<string, unknown>): Promise<unknown> {
    return this.request('tools/call', { name, arguments: args });
  }
}

integrationSuite(
  'a suite on an engine shared with other hintbox sessions',
  { timeout: 300_000, images: [ensureFaultyImage] },
  (suite) => {
    let foreign: ForeignSession;
    const created: string[] = [];

    before(async () => {
      // Spawned here, not through the helpers: the test helpers do not know its pid.
      const child = spawn(HINTBOX_BIN, ['run', writeProfile(faultyProfile(`faulty-user-${process.pid}`))], {
        env: {
          PATH: process.env.PATH ?? '',
          HOME: process.env.HOME ?? '/root',
          HINTBOX_STATE_DIR: scratchFolder('hintbox-user-state-'),
        },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      foreign = new ForeignSession(child);
      await foreign.request('initialize', {
        protocolVersion: '2025-06-18',
        capabilities: {},
        clientInfo: { name: 'a user', version: '1' },
      });
      child.stdin.write(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) + '\n');
      await foreign.call('record', { n: 1 });
      await foreign.call('echo', { n: 1 });
      assert.ok((await containersOf(child.pid)).length >= 2, "the user's session has its sandboxes (control)");

      // A user's hintbox in a container of its own (its sandboxes' owner host is that container's
      // host name), one of its sandboxes, and an unrelated container.
      const { docker: d } = await docker();
      const run = async (labels: Record<string, string>): Promise<string> => {
        const container = await d.createContainer({
          Image: FAULTY_IMAGE,
          Entrypoint: ['sleep', '600'],
          Labels: { [LABEL_HERE]: String(process.pid), ...labels },
          HostConfig: { NetworkMode: 'none', AutoRemove: false },
        });
        created.push(container.id);
        await container.start();
        return container.id;
      };
      const hintboxInContainer = await run({});
      const host = (await d.getContainer(hintboxInContainer).inspect()).Config.Hostname;
      await run({
        [LABEL_SESSION]: `user${process.pid}`,
        [LABEL_SERVER]: 'user-server',
        [LABEL_CLASS]: 'ro-offline',
        [LABEL_OWNER_HOST]: host,
        [LABEL_OWNER_PID]: '7',
      });
      await run({ 'com.example.app': 'database' });
    });

    suite.defer(async () => {
      foreign?.child.stdin.end(); // the user's client leaves: their hintbox tears down
      await foreign?.exited;
      const { docker: d } = await docker();
      for (const id of created) await d.getContainer(id).remove({ force: true });
    });

    const othersStillThere = async (): Promise<void> => {
      assert.ok((await containersOf(foreign.child.pid)).length >= 2, "the user's session's sandboxes");
      const { docker: d } = await docker();
      const here = await d.listContainers({ filters: { label: [`${LABEL_HERE}=${process.pid}`] } });
      assert.equal(here.length, 3, 'the containerised hintbox, its sandbox and the unrelated container run');
    };

    it("the leftover checks pass while other sessions run, and neither they nor hintbox's sweep touch those", async () => {
      await assertNoLeftoversWithin(2000);
      const swept = await hintboxCommand(['sweep']);
      assert.equal(swept.code, 0, swept.stderr);
      await othersStillThere();
      const answer = (await foreign.call('echo', { n: 2 })) as { result?: { structuredContent?: unknown } };
      assert.deepEqual(answer.result?.structuredContent, { n: 2, pad: 0 }, "the user's session still answers");
    });

    it("and still catch the test's own leftovers: a run not disposed, then killed, until the sweep", async () => {
      const own = await runHintbox(writeProfile(faultyProfile(`faulty-own-${process.pid}`)));
      await own.client.callTool({ name: 'record', arguments: { n: 1 } });
      await assert.rejects(assertNoLeftoversWithin(2000), /no hintbox containers left/, 'a run still alive');
      process.kill(own.pid, 'SIGKILL');
      await own.exited;
      await own.client.close().catch(() => undefined);
      await assert.rejects(assertNoLeftoversWithin(2000), /no hintbox containers left/, 'a killed run');
      const swept = await hintboxCommand(['sweep']);
      assert.equal(swept.code, 0, swept.stderr);
      await assertNoLeftoversWithin(2000);
      await othersStillThere();
    });

    it('a failing test that never disposed its hintbox leaves no folder in the temporary folder, nor a container', async () => {
      const tmp = scratchFolder('hintbox-failing-tmp-');
      const pidFile = path.join(scratchFolder('hintbox-failing-pid-'), 'pid');
      const child = spawn(
        process.execPath,
        ['--import', 'tsx', '--test', '--test-force-exit', '--test-reporter=dot', 'test/fixtures/failing-test.ts'],
        {
          cwd: REPO,
          // Without NODE_TEST_CONTEXT: a runner of its own, not a subtest reporting to this one.
          env: { ...withoutTestContext(process.env), TMPDIR: tmp, HINTBOX_FAILING_PID_FILE: pidFile },
          stdio: 'ignore',
        },
      );
      const code = await new Promise((resolve) => child.once('exit', resolve));
      assert.equal(code, 1, 'the fixture test fails (and its file ends: --test-force-exit)');
      assert.ok(existsSync(pidFile), 'the fixture ran its hintbox (control)');
      const pid = Number(readFileSync(pidFile, 'utf8'));
      // Its hintbox lost its client with the test process. It may tear down by itself, or end
      // before its teardown is done (the runner's forced exit took it along: seen on CI, the
      // sandbox left exited): what it left is then the next start's to sweep, as after any crash.
      await eventually(
        () => Promise.resolve(!isProcessAlive(pid)),
        60_000,
        "the failing test's hintbox to end with its test",
      );
      const swept = await hintboxCommand(['sweep'], { TMPDIR: tmp });
      assert.equal(swept.code, 0, swept.stderr);
      await eventually(async () => (await containersOf(pid)).length === 0, 15_000, "the failing test's sandboxes gone");
      // tsx's own compile cache (tsx-<uid>) is tsx's, not the test's.
      const left = () => readdirSync(tmp).filter((name) => !name.startsWith('tsx-'));
      await eventually(async () => left().length === 0, 30_000, 'no folder of the failing test left').catch(() => {
        assert.deepEqual(left(), []);
      });
    });
  },
);
