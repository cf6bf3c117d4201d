import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { WebSocketServer, type WebSocket } from 'ws';
import { KubeConfig } from '@kubernetes/client-node';
import { attachToGate, AttachError } from '../../src/engine/kubernetes/pod-attach.js';
import { packagePath } from '../../src/util/package-root.js';

/**
 * The attach client against a minimal stand-in for the API server's attach endpoint: the wire
 * protocol only (a WebSocket upgrade at /api/v1/namespaces/NS/pods/POD/attach, the
 * `v4.channel.k8s.io` frames, an HTTP error for a pod that is not there, a Status on channel 3).
 * Behind it, the real gate binary in stdio mode runs a real fixture MCP server, so the hold and
 * release handshake and MCP over the attach are the real ones.
 */

const GATE = packagePath('dist', 'hintbox-gate');
const SERVER = fileURLToPath(new URL('../fixtures/liar/server.mjs', import.meta.url));
const TOKEN = 'f00dfeed';

let api: http.Server;
let url: string;
const children = new Set<ChildProcess>();
/** What the stand-in's pods do: `gate` runs the gate; `impostor` prints another line first. */
const pods: Record<string, 'gate' | 'impostor'> = { sandbox: 'gate', impostor: 'impostor' };
/** Whether the server process ran (its first stderr line arrived). */
let serverRan = false;

function serveAttach(ws: WebSocket, pod: 'gate' | 'impostor'): void {
  const command =
    pod === 'gate'
      ? [GATE, process.execPath, SERVER]
      : [process.execPath, '-e', 'console.log("an impostor, not the gate"); setInterval(() => {}, 1e6)'];
  const child = spawn(command[0]!, command.slice(1), {
    env: { PATH: process.env.PATH ?? '', HINTBOX_GATE_SOCKET: '-', HINTBOX_GATE_TOKEN: TOKEN, GLIBC_TUNABLES: '' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  children.add(child);
  const frame = (channel: number, data: Buffer): void => ws.send(Buffer.concat([Buffer.from([channel]), data]));
  child.stdout.on('data', (d: Buffer) => frame(1, d));
  child.stderr.on('data', (d: Buffer) => {
    serverRan = true;
    frame(2, d);
  });
  child.on('exit', (code) => {
    const status = code === 0 ? { status: 'Success' } : { status: 'Failure', message: `command exited ${code}` };
    frame(3, Buffer.from(JSON.stringify({ kind: 'Status', apiVersion: 'v1', ...status })));
    ws.close();
  });
  ws.on('message', (data: Buffer) => {
    if (data[0] === 0) child.stdin.write(data.subarray(1));
  });
  ws.on('close', () => child.kill('SIGKILL'));
}

before(async () => {
  api = http.createServer((_req, res) => res.writeHead(404).end());
  const wss = new WebSocketServer({
    noServer: true,
    handleProtocols: (offered) => (offered.has('v4.channel.k8s.io') ? 'v4.channel.k8s.io' : false),
  });
  api.on('upgrade', (req, socket, head) => {
    const match = /^\/api\/v1\/namespaces\/hintbox\/pods\/([^/]+)\/attach\?/.exec(req.url ?? '');
    const pod = match ? pods[match[1]!] : undefined;
    if (!pod || !req.url!.includes('stdin=true')) {
      socket.end('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => serveAttach(ws, pod));
  });
  await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
});

/** Attaches to the stand-in's sandbox Pod, whose gate runs the liar fixture. */
function attachSandbox(): ReturnType<typeof attachToGate> {
  return attachToGate({
    kubeConfig: kubeConfigFor(url),
    namespace: 'hintbox',
    pod: 'sandbox',
    token: TOKEN,
    timeoutMs: 5000,
  });
}

/** The stand-in's address as a kubeconfig; plain HTTP on loopback, so there is no TLS to verify. */
function kubeConfigFor(server: string): KubeConfig {
  const config = new KubeConfig();
  config.loadFromOptions({
    clusters: [{ name: 'stand-in', server, skipTLSVerify: true }],
    users: [{ name: 'stand-in' }],
    contexts: [{ name: 'stand-in', cluster: 'stand-in', user: 'stand-in' }],
    currentContext: 'stand-in',
  });
  return config;
}

after(async () => {
  for (const child of children) child.kill('SIGKILL');
  await new Promise((resolve) => api.close(resolve));
});

describe(
  'attach to a sandbox Pod (stand-in API, real gate)',
  { skip: existsSync(GATE) ? false : 'the gate is not built (npm run build)' },
  () => {
    // proves: K8S-ATTACH
    it('holds the server at the gate until release, then speaks MCP over the attach channels', async () => {
      serverRan = false;
      const gate = await attachSandbox();
      await new Promise((r) => setTimeout(r, 500));
      assert.equal(serverRan, false, 'nothing of the server ran while held');
      const client = new Client({ name: 'hintbox-attach-test', version: '1' });
      await client.connect(gate.release().transport);
      const { tools } = await client.listTools();
      assert.ok(
        tools.some((t) => t.name === 'write_mounted'),
        JSON.stringify(tools.map((t) => t.name)),
      );
      await client.close();
    });

    // proves: K8S-ATTACH
    it('a held gate closed without release never runs the server', async () => {
      serverRan = false;
      const gate = await attachSandbox();
      gate.close();
      await gate.ended;
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(serverRan, false);
    });

    it('fails with one line naming the pod: not there (HTTP 404), not the gate, or no answer in time', async () => {
      const kubeConfig = kubeConfigFor(url);
      await assert.rejects(
        attachToGate({ kubeConfig, namespace: 'hintbox', pod: 'gone', token: TOKEN, timeoutMs: 2000 }),
        (e: Error) => e instanceof AttachError && /^cannot attach to pod hintbox\/gone: .*404/.test(e.message),
      );
      await assert.rejects(
        attachToGate({ kubeConfig, namespace: 'hintbox', pod: 'impostor', token: TOKEN, timeoutMs: 2000 }),
        /pod hintbox\/impostor: what answered the attach is not hintbox's gate/,
      );
      await assert.rejects(
        attachToGate({ kubeConfig, namespace: 'hintbox', pod: 'sandbox', token: `${TOKEN}00`, timeoutMs: 2000 }),
        /pod hintbox\/sandbox: (what answered the attach is not hintbox's gate|the gate did not answer within 2000 ms)/,
      );
    });
  },
);
