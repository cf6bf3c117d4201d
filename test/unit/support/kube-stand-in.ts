import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { KubeConfig } from '@kubernetes/client-node';
import { WebSocketServer, type WebSocket } from 'ws';
import type { KubeObject } from '../../../src/engine/kubernetes/kubernetes-objects.js';
import { POD_GATE_PATH } from '../../../src/engine/kubernetes/sandbox-pod.js';

/**
 * A minimal stand-in for a Kubernetes API server and one node's kubelet, speaking the real wire
 * protocol for what hintbox's Kubernetes engine uses: create, read, list by label selector and
 * delete of Pods, Services and NetworkPolicies in a namespace (JSON, the API's `Status` objects
 * and HTTP codes on errors), and a Pod's attach (a WebSocket, `v4.channel.k8s.io`).
 *
 * Its kubelet runs a Pod's `server` container as a local process: the real gate binary where the
 * Pod names the gate's copy (in a PID and mount namespace of its own: `unshare`, then `setpriv`
 * to the Pod's `runAsUser`/`runAsGroup`, with no new privileges), then the Pod's command. As a real kubelet, it starts the container
 * when the Pod is created, not when someone attaches, and an attach carries only what the
 * container writes after it (what it wrote before is dropped). It enforces none of the Pod's
 * securityContext, volumes or policies: those are the renderer's tests and `podman kube play`'s.
 */

export interface StandInOptions {
  /** The real gate binary, run where a Pod names `POD_GATE_PATH`. */
  gate: string;
  /** Images the "registry" does not have: their Pods wait with ErrImagePull. */
  unpullable?: readonly string[];
}

interface RunningPod {
  child?: ChildProcess;
  /** Its process is `unshare`, whose child is the gate. */
  inNamespace?: boolean;
  attached?: WebSocket;
}

const COLLECTIONS: Record<string, string> = {
  pods: 'Pod',
  services: 'Service',
  networkpolicies: 'NetworkPolicy',
};

export class KubeStandIn {
  /** Every request as `METHOD path` (the attach as `ATTACH pod`), in order. */
  readonly requests: string[] = [];
  /** Requests refused with 403 Forbidden, as `METHOD Kind` (`POST Pod`): RBAC that lacks a verb. */
  readonly forbidden = new Set<string>();
  /** The objects by `kind/namespace/name`. */
  readonly objects = new Map<string, KubeObject>();
  private readonly running = new Map<string, RunningPod>();
  private readonly server: http.Server;
  private url = '';
  private nextIp = 10;

  private constructor(private readonly options: StandInOptions) {
    this.server = http.createServer((req, res) => this.serve(req, res));
    const wss = new WebSocketServer({
      noServer: true,
      handleProtocols: (offered) => (offered.has('v4.channel.k8s.io') ? 'v4.channel.k8s.io' : false),
    });
    this.server.on('upgrade', (req, socket, head) => {
      const match = /^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/]+)\/attach\?/.exec(req.url ?? '');
      const key = match ? `Pod/${match[1]}/${match[2]}` : '';
      const pod = this.running.get(key);
      this.requests.push(`ATTACH ${match?.[2] ?? req.url}`);
      if (!pod?.child || !req.url?.includes('stdin=true')) {
        socket.end('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n');
        return;
      }
      wss.handleUpgrade(req, socket, head, (ws) => this.attach(ws, pod));
    });
  }

  static async start(options: StandInOptions): Promise<KubeStandIn> {
    const standIn = new KubeStandIn(options);
    await new Promise<void>((resolve) => standIn.server.listen(0, '127.0.0.1', resolve));
    standIn.url = `http://127.0.0.1:${(standIn.server.address() as AddressInfo).port}`;
    return standIn;
  }

  /** A kubeconfig for the stand-in (plain HTTP on loopback) with `namespace` as its context's. */
  kubeConfig(namespace = 'hintbox'): KubeConfig {
    const config = new KubeConfig();
    config.loadFromOptions({
      clusters: [{ name: 'stand-in', server: this.url, skipTLSVerify: true }],
      users: [{ name: 'stand-in' }],
      contexts: [{ name: 'stand-in', cluster: 'stand-in', user: 'stand-in', namespace }],
      currentContext: 'stand-in',
    });
    return config;
  }

  /** The objects of a kind, by name. */
  names(kind: string): string[] {
    return [...this.objects.values()].filter((o) => o.kind === kind).map((o) => o.metadata.name);
  }

  /**
   * The process id (the host's) of the Pod's container's first process, when it was started: the
   * gate's (the child of `unshare`), else the command's.
   */
  pid(namespace: string, name: string): number | undefined {
    const entry = this.running.get(`Pod/${namespace}/${name}`);
    const pid = entry?.child?.pid;
    return pid !== undefined && entry?.inNamespace ? childrenOf(pid)[0] : pid;
  }

  /** Puts an object in as if another client had made it (uid assigned, its Pod not run). */
  put(object: KubeObject): KubeObject {
    const stored = { ...object, metadata: { ...object.metadata, uid: object.metadata.uid ?? randomUUID() } };
    this.objects.set(`${object.kind}/${object.metadata.namespace}/${object.metadata.name}`, stored);
    return stored;
  }

  async stop(): Promise<void> {
    for (const pod of this.running.values()) pod.child?.kill('SIGKILL');
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }

  private serve(req: http.IncomingMessage, res: http.ServerResponse): void {
    const url = new URL(req.url ?? '/', this.url);
    this.requests.push(`${req.method} ${url.pathname}`);
    const match = /^\/(?:api\/v1|apis\/networking\.k8s\.io\/v1)\/namespaces\/([^/]+)\/([a-z]+)(?:\/([^/]+))?$/.exec(
      url.pathname,
    );
    const kind = match ? COLLECTIONS[match[2] as string] : undefined;
    if (!match || !kind) return status(res, 404, 'NotFound', `the server could not find the requested resource`);
    const namespace = match[1] as string;
    const name = match[3];
    const key = `${kind}/${namespace}/${name}`;
    if (this.forbidden.has(`${req.method} ${kind}`)) {
      return status(
        res,
        403,
        'Forbidden',
        `${match[2]} is forbidden: cannot ${req.method} in namespace "${namespace}"`,
      );
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method === 'POST' && !name) {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as KubeObject;
        const at = `${kind}/${namespace}/${body.metadata.name}`;
        if (this.objects.has(at)) {
          return status(res, 409, 'AlreadyExists', `${match[2]} "${body.metadata.name}" already exists`);
        }
        const stored = this.put({ ...body, metadata: { ...body.metadata, namespace } });
        if (kind === 'Service') (stored.spec as Record<string, unknown>).clusterIP = `10.96.0.${this.nextIp++}`;
        if (kind === 'Pod') this.kubelet(at, stored);
        return json(res, 201, stored);
      }
      if (req.method === 'GET' && !name) {
        const selector = url.searchParams.get('labelSelector') ?? '';
        const items = [...this.objects.values()].filter(
          (o) => o.kind === kind && o.metadata.namespace === namespace && matches(o.metadata.labels ?? {}, selector),
        );
        return json(res, 200, { kind: `${kind}List`, apiVersion: 'v1', items });
      }
      const object = this.objects.get(key);
      if (!object) return status(res, 404, 'NotFound', `${match[2]} "${name}" not found`);
      if (req.method === 'GET') return json(res, 200, object);
      if (req.method === 'DELETE') {
        this.objects.delete(key);
        const pod = this.running.get(key);
        pod?.child?.kill('SIGKILL');
        pod?.attached?.close();
        this.running.delete(key);
        return json(res, 200, { kind: 'Status', apiVersion: 'v1', status: 'Success' });
      }
      return status(res, 405, 'MethodNotAllowed', `${req.method} is not served by the stand-in`);
    });
  }

  /** Runs the Pod's `server` container as a process; a container without a command just "runs". */
  private kubelet(key: string, pod: KubeObject): void {
    const container = ((pod.spec as { containers: Record<string, unknown>[] }).containers ?? []).find(
      (c) => c.name === 'server' || c.name === 'squid',
    ) as { name: string; image: string; command?: string[]; env?: { name: string; value: string }[] };
    const setStatus = (phase: string, state: Record<string, unknown>): void => {
      pod.status = {
        phase,
        containerStatuses: [{ name: container.name, image: container.image, imageID: imageId(container.image), state }],
      };
    };
    if (this.options.unpullable?.includes(container.image)) {
      setStatus('Pending', { waiting: { reason: 'ErrImagePull', message: `${container.image}: not found` } });
      return;
    }
    const entry: RunningPod = {};
    this.running.set(key, entry);
    const command = container.command ?? [];
    if (command.length === 0) return setStatus('Running', { running: { startedAt: new Date().toISOString() } });
    // The gate stops every other process of its PID namespace on a freeze: as on a kubelet, it
    // runs as the first process of a namespace of its own (never on the host's, where its
    // kill(-1, SIGSTOP) would reach every process of the machine; the gate refuses that too).
    // --kill-child: the namespace dies with the process the stand-in kills.
    // As a kubelet, it runs the container as the Pod's user (the container's securityContext over
    // the Pod's), with no new privileges: the gate is PID 1 as the same uid as the server.
    const user = runAsOf(pod.spec as PodSpecUser, container as PodSpecUser);
    const asUser = user
      ? ['setpriv', `--reuid=${user.uid}`, `--regid=${user.gid}`, '--clear-groups', '--no-new-privs']
      : [];
    const argv =
      command[0] === POD_GATE_PATH
        ? [
            'unshare',
            '--pid',
            '--fork',
            '--mount-proc',
            '--kill-child',
            ...asUser,
            this.options.gate,
            ...command.slice(1),
          ]
        : command;
    const env = Object.fromEntries((container.env ?? []).map((e) => [e.name, e.value]));
    const child = spawn(argv[0] as string, argv.slice(1), {
      env: { PATH: process.env.PATH ?? '', ...env },
      cwd: tmpdir(),
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    entry.child = child;
    entry.inNamespace = argv !== command;
    const frame = (channel: number, data: Buffer): void =>
      entry.attached?.send(Buffer.concat([Buffer.from([channel]), data]));
    // As a kubelet's attach: only what is written while someone is attached reaches them.
    child.stdout?.on('data', (d: Buffer) => frame(1, d));
    child.stderr?.on('data', (d: Buffer) => frame(2, d));
    child.stdin?.on('error', () => undefined);
    child.on('exit', (code, signal) => {
      const exitCode = code ?? 128 + (signal ? 9 : 0);
      setStatus(exitCode === 0 ? 'Succeeded' : 'Failed', { terminated: { exitCode } });
      const result = exitCode === 0 ? { status: 'Success' } : { status: 'Failure', message: `exit code ${exitCode}` };
      frame(3, Buffer.from(JSON.stringify({ kind: 'Status', apiVersion: 'v1', ...result })));
      entry.attached?.close();
    });
    setStatus('Running', { running: { startedAt: new Date().toISOString() } });
  }

  private attach(ws: WebSocket, pod: RunningPod): void {
    pod.attached = ws;
    ws.on('message', (data: Buffer) => {
      if (data[0] === 0) pod.child?.stdin?.write(data.subarray(1));
    });
    // stdinOnce: the container's stdin closes with the first attach.
    ws.on('close', () => pod.child?.stdin?.end());
  }
}

/** The host's ids of a process's children (Linux: /proc/PID/task/PID/children). */
export function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').split(' ').filter(Boolean).map(Number);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
}

/** Equality-based and existence selectors: `a=b,c`. */
function matches(labels: Record<string, string>, selector: string): boolean {
  return selector
    .split(',')
    .filter(Boolean)
    .every((term) => {
      const [key, value] = term.split('=') as [string, string?];
      return value === undefined ? key in labels : labels[key] === value;
    });
}

function imageId(image: string): string {
  return `${image.split(':')[0]}@sha256:${'0'.repeat(64)}`;
}

function json(res: http.ServerResponse, code: number, body: unknown): void {
  res.writeHead(code, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

function status(res: http.ServerResponse, code: number, reason: string, message: string): void {
  json(res, code, { kind: 'Status', apiVersion: 'v1', status: 'Failure', message, reason, code });
}

interface PodSpecUser {
  securityContext?: { runAsUser?: number; runAsGroup?: number };
}

/** The user a container runs as: its own securityContext's, else the Pod's; undefined when neither says. */
function runAsOf(pod: PodSpecUser, container: PodSpecUser): { uid: number; gid: number } | undefined {
  const uid = container.securityContext?.runAsUser ?? pod.securityContext?.runAsUser;
  const gid = container.securityContext?.runAsGroup ?? pod.securityContext?.runAsGroup ?? uid;
  return uid === undefined || gid === undefined ? undefined : { uid, gid };
}
