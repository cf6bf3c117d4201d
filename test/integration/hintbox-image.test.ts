import assert from 'node:assert/strict';
import { chmodSync, chownSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { before, describe, it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import type Docker from 'dockerode';
import { parse, stringify } from 'yaml';
import { LABEL_OWNER_HOST, LABEL_SESSION } from '../../src/engine/sandbox-labels.js';
import { HINTBOX_IMAGE } from '../../src/engine/docker/hintbox-image.js';
import { hashToken } from '../../src/serve/bearer-tokens.js';
import { scratchFolder } from '../support/scratch-folder.js';
import {
  docker,
  ensureEverythingImage,
  ensureTestImages,
  eventually,
  EVERYTHING_IMAGE,
  LABEL_TEST_HINTBOX,
  LIAR_IMAGE,
  REPO,
} from './support/docker.js';
import { hintboxCommand, outcomeOf } from './support/hintbox-process.js';

/**
 * hintbox's own image (images/hintbox), run as a platform would: the host's Docker socket, the
 * profiles, tokens, state and temporary folders and the server's host folder all mounted at the
 * same paths; a real streamable HTTP client on the host, through a port published on 127.0.0.1.
 */

const LIAR = `liar-image-${process.pid}`;
const EVERYTHING = `every-image-${process.pid}`;
/** Every container this file starts carries it, so `after` removes them even after a failure. */
// Its hintbox containers: their sandboxes are this test's to answer for (support/docker.ts).
const LABEL_TEST = LABEL_TEST_HINTBOX;
/** The image's user (images/hintbox/Dockerfile): what it writes must be its. */
const IMAGE_UID = 10002;
const TOKEN = `platform-${process.pid}-token`;

interface Layout {
  root: string;
  profiles: string;
  tokens: string;
  state: string;
  tmp: string;
  workspace: string;
}

/**
 * One host folder with everything the container needs, owned by the image's user as README says
 * (`install -d -o 10002 -g 10002`); hintbox makes the state and temporary folders in it itself.
 */
function layout(workspaceTarget: string, workspaceSource?: string): Layout {
  const root = scratchFolder('hintbox-image-');
  chownSync(root, IMAGE_UID, IMAGE_UID);
  chmodSync(root, 0o755);
  const dirs = {
    profiles: path.join(root, 'profiles'),
    state: path.join(root, 'state'),
    tmp: path.join(root, 'tmp'),
    workspace: path.join(root, 'workspace'),
  };
  mkdirSync(dirs.profiles);
  mkdirSync(dirs.workspace);
  chownSync(dirs.workspace, IMAGE_UID, IMAGE_UID);
  const liar = {
    name: LIAR,
    server: { image: LIAR_IMAGE },
    trust: 'trusted',
    mounts: [{ source: workspaceSource ?? dirs.workspace, target: workspaceTarget }],
    network: 'none',
    limits: { pids: 64, memory: '128m' },
  };
  const everything = {
    name: EVERYTHING,
    server: { image: EVERYTHING_IMAGE, args: ['stdio'] },
    trust: 'trusted',
    split: false,
    network: 'none',
    limits: { pids: 128, memory: '256m' },
  };
  writeFileSync(path.join(dirs.profiles, 'liar.yaml'), stringify(liar));
  writeFileSync(path.join(dirs.profiles, 'everything.yaml'), stringify(everything));
  const tokens = path.join(root, 'tokens.yaml');
  writeFileSync(tokens, stringify([{ name: 'platform-alice', sha256: hashToken(TOKEN) }]));
  return { root, tokens, ...dirs };
}

/** Creates and starts the hintbox image's container on `l`, with `extraBinds` besides the same-path ones. */
async function startHintbox(l: Layout, extraBinds: string[] = []): Promise<Docker.Container> {
  const { docker: d } = await docker();
  const socketGid = statSync('/var/run/docker.sock').gid;
  const container = await d.createContainer({
    Image: HINTBOX_IMAGE,
    name: `hintbox-image-test-${process.pid}-${Math.random().toString(36).slice(2, 8)}`,
    Labels: { [LABEL_TEST]: String(process.pid) },
    // As the image's default command: the published port is named 127.0.0.1 by its clients.
    Cmd: ['serve', l.profiles, '--host', '0.0.0.0', '--tokens', l.tokens, '--allowed-host', '127.0.0.1'],
    Env: [`HINTBOX_STATE_DIR=${l.state}`, `TMPDIR=${l.tmp}`],
    ExposedPorts: { '8931/tcp': {} },
    HostConfig: {
      Binds: ['/var/run/docker.sock:/var/run/docker.sock', `${l.root}:${l.root}`, ...extraBinds],
      GroupAdd: [String(socketGid)],
      PortBindings: { '8931/tcp': [{ HostIp: '127.0.0.1', HostPort: '' }] },
    },
  });
  await container.start();
  return container;
}

/** Sandboxes started by the hintbox in `container` (their owner host is its host name). */
async function sandboxesOf(container: Docker.Container): Promise<Docker.ContainerInfo[]> {
  const { docker: d } = await docker();
  const hostname = (await container.inspect()).Config.Hostname;
  return d.listContainers({ all: true, filters: { label: [LABEL_SESSION, `${LABEL_OWNER_HOST}=${hostname}`] } });
}

/**
 * The status of a GET, or undefined when it fails or takes longer than `ms`: a fetch to a
 * published port whose container listens on nothing yet can hang with nothing of it holding
 * the event loop (seen here with Docker 20.10's docker-proxy), so it is given up on.
 */
async function statusWithin(url: string, ms: number): Promise<number | undefined> {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), ms);
  try {
    return (await fetch(url, { signal: abort.signal })).status;
  } catch {
    return undefined;
  } finally {
    clearTimeout(timer);
  }
}

async function logsOf(container: Docker.Container): Promise<string> {
  const buffer = await container.logs({ stdout: true, stderr: true, follow: false });
  // Without a TTY each frame has an 8-byte header: keep the text.
  const text: string[] = [];
  for (let at = 0; at + 8 <= buffer.length;) {
    const size = buffer.readUInt32BE(at + 4);
    text.push(buffer.subarray(at + 8, at + 8 + size).toString('utf8'));
    at += 8 + size;
  }
  return text.join('');
}

async function connect(url: string, token: string): Promise<Client> {
  const client = new Client({ name: 'image-test', version: '1.0.0' }, { capabilities: { elicitation: {} } });
  client.setRequestHandler(ElicitRequestSchema, () => ({ action: 'accept', content: { approve: true } }));
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }),
  );
  return client;
}

const textOf = (result: unknown): string => (result as { content: { text?: string }[] }).content[0]?.text ?? '';

integrationSuite(
  'the hintbox image',
  { timeout: 600_000, images: [ensureTestImages, ensureEverythingImage] },
  (suite) => {
    const started: Docker.Container[] = [];

    before(async () => {
      const t0 = Date.now();
      const built = await hintboxCommand(['images', 'build', '--hintbox']);
      assert.equal(built.code, 0, built.stderr);
      if (process.env.HINTBOX_TEST_VERBOSE) process.stderr.write(`${HINTBOX_IMAGE} ready in ${Date.now() - t0} ms\n`);
    });

    suite.defer(async () => {
      const { docker: d } = await docker();
      for (const container of started) {
        const sandboxes = await sandboxesOf(container).catch(() => []);
        await container.remove({ force: true }).catch(() => undefined);
        // hintbox removes its sandboxes when it stops; these are what a failed test left.
        for (const s of sandboxes)
          await d
            .getContainer(s.Id)
            .remove({ force: true })
            .catch(() => undefined);
      }
      const left = await d.listContainers({ all: true, filters: { label: [`${LABEL_TEST}=${process.pid}`] } });
      assert.deepEqual(left, []);
    });

    it('is hintbox on Node 20 or later, run as a user other than root, with hintbox on PATH', async () => {
      const { docker: d } = await docker();
      const info = await d.getImage(HINTBOX_IMAGE).inspect();
      assert.deepEqual(info.Config.Entrypoint, ['hintbox']);
      assert.deepEqual(info.Config.Cmd?.slice(0, 2), ['serve', '/etc/hintbox/profiles']);
      assert.deepEqual(info.Config.Cmd?.slice(-4), ['--allowed-host', '127.0.0.1', '--allowed-host', 'localhost']);
      assert.equal(info.Config.User, `${IMAGE_UID}:${IMAGE_UID}`);
      assert.ok(info.Config.Env?.includes('HINTBOX_IN_CONTAINER=1'));
      const version = JSON.parse(readFileSync(path.join(REPO, 'package.json'), 'utf8')) as { version: string };
      const container = await d.createContainer({
        Image: HINTBOX_IMAGE,
        Entrypoint: ['sh', '-c', 'node --version; command -v hintbox; hintbox --version'],
        Labels: { [LABEL_TEST]: String(process.pid) },
      });
      started.push(container);
      await container.start();
      assert.equal((await container.wait()).StatusCode, 0);
      const [node, where, hintbox] = (await logsOf(container)).trim().split('\n');
      assert.ok(Number(/^v(\d+)\./.exec(node ?? '')?.[1]) >= 20, node);
      assert.equal(where, '/usr/local/bin/hintbox');
      assert.equal(hintbox, version.version);
    });

    describe('serving two servers from the container', () => {
      let l: Layout;
      let container: Docker.Container;
      let url: string;

      before(async () => {
        l = layout('/data');
        container = await startHintbox(l);
        started.push(container);
        const port = (await container.inspect()).NetworkSettings.Ports['8931/tcp']?.[0]?.HostPort;
        assert.ok(port, 'the port is published');
        url = `http://127.0.0.1:${port}`;
        await eventually(
          async () => {
            const state = await container.inspect();
            if (!state.State.Running)
              throw new Error(`hintbox exited ${state.State.ExitCode}: ${await logsOf(container)}`);
            return (await statusWithin(`${url}/readyz`, 2000)) === 200;
          },
          120_000,
          'serve in the container to be ready',
        );
      });

      it('lists and calls tools of both servers for a token; a write lands in the host folder; the audit names the token', async () => {
        const liar = await connect(`${url}/mcp/${LIAR}`, TOKEN);
        const everything = await connect(`${url}/mcp/${EVERYTHING}`, TOKEN);
        try {
          assert.ok((await liar.listTools()).tools.some((t) => t.name === 'unannotated_write'));
          assert.ok((await everything.listTools()).tools.some((t) => t.name === 'echo'));
          assert.equal(
            textOf(await everything.callTool({ name: 'echo', arguments: { message: 'boxed' } })),
            'Echo: boxed',
          );
          const wrote = outcomeOf(
            await liar.callTool({
              name: 'unannotated_write',
              arguments: { path: '/data/out.txt', content: 'from a sibling' },
            }),
          );
          assert.deepEqual(wrote, { ok: true, value: 'written' });
          assert.ok(readFileSync(path.join(l.workspace, 'out.txt')).equals(Buffer.from('from a sibling')));
          assert.ok((await sandboxesOf(container)).length > 0, 'sandboxes are siblings on the host engine');
        } finally {
          for (const client of [liar, everything]) {
            await (client.transport as StreamableHTTPClientTransport).terminateSession().catch(() => undefined);
            await client.close();
          }
        }
        const audit = await hintboxCommand(['audit', '--server', LIAR, '--json'], { HINTBOX_STATE_DIR: l.state });
        assert.equal(audit.code, 0, audit.stderr);
        const [intent] = audit.stdout
          .split('\n')
          .filter(Boolean)
          .map((line) => JSON.parse(line) as { tool: string; caller: string | null });
        assert.deepEqual(
          { tool: intent?.tool, caller: intent?.caller },
          { tool: 'unannotated_write', caller: 'platform-alice' },
        );
      });

      it('answers 401 to a call without a token', async () => {
        const response = await fetch(`${url}/mcp/${EVERYTHING}`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
          body: JSON.stringify({
            jsonrpc: '2.0',
            id: 1,
            method: 'tools/call',
            params: { name: 'echo', arguments: { message: 'x' } },
          }),
        });
        assert.equal(response.status, 401);
      });

      it('reloads nothing on SIGHUP when a new profile mounts a path that is not on the host', async () => {
        // /var/lib/hintbox/tmp is the image's own folder: present inside, not mounted from the host.
        const stray = {
          name: 'stray',
          server: { image: LIAR_IMAGE },
          mounts: [{ source: '/var/lib/hintbox/tmp', target: '/data' }],
        };
        writeFileSync(path.join(l.profiles, 'stray.yaml'), stringify(stray));
        await container.kill({ signal: 'SIGHUP' });
        await eventually(
          async () => /SIGHUP: nothing reloaded/.test(await logsOf(container)),
          20_000,
          'the reload refused',
        );
        assert.match(
          await logsOf(container),
          /serve: stray's mount \/data \/var\/lib\/hintbox\/tmp is in hintbox's container, not on the host/,
        );
        const response = await fetch(`${url}/mcp/stray`, {
          method: 'POST',
          headers: { Authorization: `Bearer ${TOKEN}` },
        });
        assert.equal(response.status, 404);
      });

      it('stops on SIGTERM with exit 0 and leaves no sandbox', async () => {
        const client = await connect(`${url}/mcp/${EVERYTHING}`, TOKEN);
        assert.equal(textOf(await client.callTool({ name: 'echo', arguments: { message: 'last' } })), 'Echo: last');
        assert.ok((await sandboxesOf(container)).length > 0, 'sandboxes run before SIGTERM');
        await container.kill({ signal: 'SIGTERM' });
        assert.equal((await container.wait()).StatusCode, 0, await logsOf(container));
        assert.deepEqual(await sandboxesOf(container), []);
        await client.close().catch(() => undefined);
      });
    });

    // proves: CONTAINER-SAME-PATH
    it('refuses to start (exit 2) when a mount is at another path inside than on the host, and starts no sandbox', async () => {
      const l = layout('/data', '/elsewhere');
      const container = await startHintbox(l, [`${l.workspace}:/elsewhere`]);
      started.push(container);
      const { StatusCode } = (await container.wait()) as { StatusCode: number };
      const logs = await logsOf(container);
      assert.equal(StatusCode, 2, logs);
      assert.match(
        logs,
        new RegExp(
          `serve: ${LIAR}'s mount /data /elsewhere is the host's ${l.workspace} \\(mounted at another path\\): .*-v /elsewhere:/elsewhere\\)\\n`,
        ),
      );
      assert.deepEqual(await sandboxesOf(container), []);
    });

    it('has a compose example wired to the image, its profiles and a Postgres for the audit sink', () => {
      const compose = parse(readFileSync(path.join(REPO, 'examples', 'compose.yaml'), 'utf8')) as {
        services: Record<
          string,
          {
            image?: string;
            environment?: Record<string, string>;
            volumes?: string[];
            ports?: string[];
            depends_on?: unknown;
            group_add?: unknown[];
          }
        >;
      };
      const hintbox = compose.services.hintbox;
      assert.ok(hintbox && compose.services.postgres, Object.keys(compose.services).join(', '));
      assert.match(hintbox.image ?? '', /^hintbox\/hintbox:/);
      assert.match(hintbox.environment?.HINTBOX_DATABASE_URL ?? '', /^postgres(ql)?:\/\/[^@]+@postgres(:5432)?\//);
      assert.ok(hintbox.volumes?.includes('/var/run/docker.sock:/var/run/docker.sock'));
      // Every bind but the profiles and tokens (read by hintbox, never bound into a sandbox) is at
      // the same path inside as on the host, and the state folder and TMPDIR are among them.
      const binds = (hintbox.volumes ?? []).map((v) => v.split(':'));
      for (const [source, target] of binds.filter(([, target]) => !target?.startsWith('/etc/hintbox/'))) {
        assert.equal(source, target);
      }
      assert.ok(
        binds.some(([source]) => source === '/var/lib/hintbox'),
        'state and TMPDIR (the image defaults)',
      );
      assert.deepEqual(
        binds.filter(([, target]) => target?.startsWith('/etc/hintbox/')).map(([, target, mode]) => [target, mode]),
        [
          ['/etc/hintbox/profiles', 'ro'],
          ['/etc/hintbox/tokens.yaml', 'ro'],
        ],
      );
      const example = parse(readFileSync(path.join(REPO, 'examples', 'profiles', 'files.yaml'), 'utf8')) as {
        mounts: { source: string }[];
      };
      for (const { source } of example.mounts)
        assert.ok(
          binds.some(([s]) => s === source),
          source,
        );
      for (const port of hintbox.ports ?? []) assert.match(port, /^127\.0\.0\.1:/);
      assert.ok(hintbox.group_add?.length, 'the socket group is given');
    });
  },
);
