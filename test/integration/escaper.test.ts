import assert from 'node:assert/strict';
import net from 'node:net';
import { chmodSync, chownSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { LABEL_CLASS } from '../../src/engine/sandbox-labels.js';
import { containersOf, docker } from './support/docker.js';
import { ESCAPER_IMAGE, ensureEscaperImage } from './support/escaper.js';
import { hintboxCommand, outcomeOf, runHintbox, sandboxFolder, writeProfile } from './support/hintbox-process.js';

/**
 * A server that goes after hintbox and the host rather than its own sandbox's rules
 * (test/fixtures/escaper). Each test attacks the way a malicious server would and asserts the
 * outcome: what reached the server, what landed on the host's disk.
 */

/** Variables the image itself sets (its ENV) and Docker adds: not the profile's, not hintbox's. */
async function imageEnvKeys(): Promise<string[]> {
  const { docker: d } = await docker();
  const info = await d.getImage(ESCAPER_IMAGE).inspect();
  return [...(info.Config.Env ?? []).map((e) => e.slice(0, e.indexOf('='))), 'HOSTNAME', 'PATH'];
}

integrationSuite('the environment a server gets', { timeout: 180_000, images: [ensureEscaperImage] }, () => {
  const envOf = async (env: Record<string, string>): Promise<Record<string, string>> => {
    const profile = writeProfile({
      name: `escaper-env-${process.pid}`,
      server: { image: ESCAPER_IMAGE },
      trust: 'trusted',
      env,
    });
    await using hintbox = await runHintbox(profile);
    const result = outcomeOf(await hintbox.client.callTool({ name: 'env', arguments: {} }));
    assert.equal(result.ok, true, JSON.stringify(result));
    return result.value as Record<string, string>;
  };

  // proves: ENV
  it("passes the server only the profile's environment, HOME, TMPDIR and the image's own (no GLIBC_TUNABLES)", async () => {
    const seen = await envOf({ PROFILE_SAYS: 'hello' });
    const allowed = new Set(['PROFILE_SAYS', 'HOME', 'TMPDIR', ...(await imageEnvKeys())]);
    assert.deepEqual(
      Object.keys(seen).filter((k) => !allowed.has(k)),
      [],
      `variables the profile did not give: ${JSON.stringify(seen)}`,
    );
    assert.equal(seen.PROFILE_SAYS, 'hello');
    assert.equal('GLIBC_TUNABLES' in seen, false);
  });

  // proves: ENV
  it("keeps the profile's own GLIBC_TUNABLES for the server", async () => {
    const seen = await envOf({ GLIBC_TUNABLES: 'glibc.malloc.perturb=42' });
    assert.equal(seen.GLIBC_TUNABLES, 'glibc.malloc.perturb=42');
  });
});

integrationSuite("a server's stderr on the host's disk", { timeout: 240_000, images: [ensureEscaperImage] }, () => {
  // proves: LOG-BOUNDED
  it("keeps Docker's log of a sandbox and hintbox's own log bounded when a read-only tool floods stderr", async (t) => {
    const profile = writeProfile({
      name: `escaper-log-${process.pid}`,
      server: { image: ESCAPER_IMAGE },
      trust: 'trusted',
      mounts: [{ source: sandboxFolder(), target: '/workspace' }],
    });
    await using hintbox = await runHintbox(profile);
    const result = outcomeOf(await hintbox.client.callTool({ name: 'stderr_flood', arguments: { megabytes: 48 } }));
    assert.equal(result.ok, true, JSON.stringify(result));
    // Docker's copier and hintbox's reader trail the server: give them time to catch up.
    await new Promise((r) => setTimeout(r, 3000));
    const { docker: d } = await docker();
    const [sandbox] = (await containersOf(hintbox.pid, false)).filter((c) => c.Labels[LABEL_CLASS] === 'ro-offline');
    assert.ok(sandbox, 'the read-only sandbox runs');
    const logPath = (await d.getContainer(sandbox.Id).inspect()).LogPath;
    assert.ok(logPath, 'the engine names a log file');
    const folder = path.dirname(logPath);
    const onDisk = readdirSync(folder)
      .filter((name) => name.startsWith(path.basename(logPath)))
      .reduce((sum, name) => sum + statSync(path.join(folder, name)).size, 0);
    t.diagnostic(`Docker's log: ${onDisk} bytes; hintbox's log: ${Buffer.byteLength(hintbox.stderr())} bytes`);
    assert.ok(onDisk < 8 * 1024 * 1024, `Docker's log of the sandbox holds ${onDisk} bytes for 48 MB written`);
    const relayed = Buffer.byteLength(hintbox.stderr());
    assert.ok(relayed < 8 * 1024 * 1024, `hintbox's own log took ${relayed} bytes of the server's 48 MB`);
  });
});

integrationSuite('pre-approved paths', { timeout: 240_000, images: [ensureEscaperImage] }, () => {
  const precious = 'notes the server must not overwrite\n';
  /** A workspace with notes.txt and an empty scratch/ folder, and a trusted profile with this rule. */
  const setUp = (rule: unknown): { workspace: string; profile: string } => {
    const workspace = sandboxFolder();
    writeFileSync(path.join(workspace, 'notes.txt'), precious);
    mkdirSync(path.join(workspace, 'scratch'));
    if (process.getuid?.() === 0) chownSync(path.join(workspace, 'scratch'), 10001, 10001);
    const profile = writeProfile({
      name: `escaper-pre-${process.pid}`,
      server: { image: ESCAPER_IMAGE },
      trust: 'trusted',
      mounts: [{ source: workspace, target: '/workspace' }],
      preApprove: [{ tool: 'write_file', arguments: { path: rule } }],
    });
    return { workspace, profile };
  };

  // proves: PRE-APPROVE-PATHS
  it('does not let a regex rule for a folder pre-approve a path that walks out of it with ..', async () => {
    const { workspace, profile } = setUp('/workspace/scratch/.*');
    await using hintbox = await runHintbox(profile, { confirmations: 'deny' });
    await hintbox.client.callTool({
      name: 'write_file',
      arguments: { path: '/workspace/scratch/../notes.txt', content: 'overwritten' },
    });
    assert.equal(readFileSync(path.join(workspace, 'notes.txt'), 'utf8'), precious, 'notes.txt is byte-identical');
    assert.equal(hintbox.asked.length, 1, 'the call was put to a person');
  });

  // proves: PRE-APPROVE-PATHS
  it('pre-approves by path only inside the folder (under:), and confirms a path that walks out of it', async () => {
    const { workspace, profile } = setUp({ under: '/workspace/scratch' });
    await using hintbox = await runHintbox(profile, { confirmations: 'deny' });
    const inside = outcomeOf(
      await hintbox.client.callTool({
        name: 'write_file',
        arguments: { path: '/workspace/scratch/ok.txt', content: 'fine' },
      }),
    );
    assert.equal(inside.ok, true, JSON.stringify(inside));
    assert.equal(hintbox.asked.length, 0, 'inside the folder: pre-approved, not asked');
    for (const escape of [
      '/workspace/scratch/../notes.txt',
      '/workspace/scratch/./../notes.txt',
      'scratch/../notes.txt',
    ]) {
      await hintbox.client.callTool({ name: 'write_file', arguments: { path: escape, content: 'overwritten' } });
    }
    assert.equal(hintbox.asked.length, 3, 'every escape was put to a person');
    assert.equal(readFileSync(path.join(workspace, 'notes.txt'), 'utf8'), precious, 'notes.txt is byte-identical');
  });
});

integrationSuite('Unix sockets in a mount', { timeout: 240_000, images: [ensureEscaperImage] }, () => {
  /**
   * A host service in the project folder, as a test double: whoever connects and says
   * "overwrite" has it overwrite a host file the sandbox cannot otherwise reach.
   */
  const startService = async (folder: string, victim: string): Promise<{ heard: string[]; close(): void }> => {
    const heard: string[] = [];
    const server = net.createServer((socket) => {
      socket.on('data', (data) => {
        heard.push(data.toString('utf8'));
        if (data.toString('utf8').includes('overwrite')) writeFileSync(victim, 'overwritten by the service\n');
        socket.end('done');
      });
    });
    const socketPath = path.join(folder, 'service.sock');
    await new Promise<void>((resolve) => server.listen(socketPath, resolve));
    // As a service of the operator's own user would be: the sandbox runs as that user by default.
    chmodSync(socketPath, 0o777);
    return { heard, close: () => server.close() };
  };

  // proves: MOUNT-SOCKETS
  it('refuses to run or plan over a read-only mount that holds a host socket, and the service never hears from the server', async () => {
    const workspace = sandboxFolder();
    const elsewhere = sandboxFolder();
    const victim = path.join(elsewhere, 'victim.txt');
    const precious = 'a host file outside every mount\n';
    writeFileSync(victim, precious);
    const service = await startService(workspace, victim);
    try {
      const profile = writeProfile({
        name: `escaper-sock-${process.pid}`,
        server: { image: ESCAPER_IMAGE },
        trust: 'trusted',
        mounts: [{ source: workspace, target: '/workspace', mode: 'ro' }],
      });
      let refused = '';
      try {
        await using hintbox = await runHintbox(profile);
        // The read-only, network-less tool talks to the host service through the mount.
        await hintbox.client.callTool({
          name: 'socket_send',
          arguments: { path: '/workspace/service.sock', message: 'overwrite' },
        });
      } catch (error) {
        refused = (error as Error).message;
      }
      assert.equal(readFileSync(victim, 'utf8'), precious, 'the host file is byte-identical');
      assert.deepEqual(service.heard, [], 'the service heard nothing from the sandbox');
      assert.match(refused, /mounts\[0\]\.source: .*service\.sock is a Unix socket/);

      const plan = await hintboxCommand(['plan', profile]);
      assert.equal(plan.code, 2, plan.stderr);
      const lines = plan.stderr.trim().split('\n');
      assert.equal(lines.length, 1, plan.stderr);
      assert.match(
        lines[0]!,
        /profile\.yaml: mounts\[0\]\.source: .*\/service\.sock is a Unix socket.*allowSpecialFiles/,
      );
    } finally {
      service.close();
    }
  });

  it('plans a mount with a socket when the profile allows special files there', async () => {
    const workspace = sandboxFolder();
    const service = await startService(workspace, path.join(sandboxFolder(), 'victim.txt'));
    try {
      const profile = writeProfile({
        name: `escaper-sock-ok-${process.pid}`,
        server: { image: ESCAPER_IMAGE },
        trust: 'trusted',
        mounts: [{ source: workspace, target: '/workspace', mode: 'ro', allowSpecialFiles: true }],
      });
      const plan = await hintboxCommand(['plan', profile]);
      assert.equal(plan.code, 0, plan.stderr);
    } finally {
      service.close();
    }
  });
});

integrationSuite('a preview of thousands of files', { timeout: 300_000, images: [ensureEscaperImage] }, () => {
  // proves: PREVIEW-BOUNDED
  it('keeps hintbox responsive while it previews a dry run that leaves 2000 files, and says the preview was cut', async (t) => {
    const workspace = sandboxFolder();
    const profile = writeProfile({
      name: `escaper-preview-${process.pid}`,
      server: { image: ESCAPER_IMAGE },
      trust: 'trusted',
      mounts: [{ source: workspace, target: '/workspace' }],
    });
    await using hintbox = await runHintbox(profile, { confirmations: 'deny' });
    // While the call waits for its confirmation, a ping every 100 ms: its answer comes from
    // hintbox's event loop, so its delay is that loop's lag.
    let worstPingMs = 0;
    let pinging = true;
    const pings = (async () => {
      while (pinging) {
        const sent = performance.now();
        await hintbox.client.ping();
        worstPingMs = Math.max(worstPingMs, performance.now() - sent);
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    const started = performance.now();
    await hintbox.client.callTool(
      { name: 'make_files', arguments: { dir: '/workspace/out', count: 2000, lines: 2000 } },
      undefined,
      { timeout: 280_000 },
    );
    const tookMs = performance.now() - started;
    pinging = false;
    await pings;
    t.diagnostic(`confirmation after ${Math.round(tookMs)} ms; worst ping ${Math.round(worstPingMs)} ms`);
    assert.equal(hintbox.asked.length, 1, 'the call was put to a person');
    const message = hintbox.asked[0]!.message;
    assert.match(message, /added: \/workspace\/out\/f00000\.txt/, 'the preview shows what was added');
    assert.match(message, /preview was cut/, message.slice(-600));
    assert.ok(worstPingMs < 1500, `hintbox's event loop stalled ${Math.round(worstPingMs)} ms during the preview`);
    assert.ok(tookMs < 60_000, `the confirmation came ${Math.round(tookMs)} ms after the call`);
    assert.deepEqual(readdirSync(workspace), [], 'the call was declined: nothing real was written');
  });
});
