import http from 'node:http';
import https from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node/dist/config.js';
import { HintboxError } from '../../util/hintbox-error.js';
import type { KubeObject } from './kubernetes-objects.js';

/**
 * The few REST calls the Kubernetes engine makes (create, read, list by label, delete, in one
 * namespace), as plain JSON over the cluster's HTTPS with the kubeconfig's credentials
 * (`KubeConfig.applyToHTTPSOptions`: certificates, tokens, exec plugins). Not the library's
 * generated API classes: they would put every Kubernetes model into the CLI's bundle for five
 * paths, and their errors carry the whole response; here every failure is one line naming the
 * object and the API's own reason.
 */

/** The kinds hintbox makes, and where their collection is in a namespace. */
export const KINDS = {
  Pod: '/api/v1/namespaces/{ns}/pods',
  Service: '/api/v1/namespaces/{ns}/services',
  NetworkPolicy: '/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies',
} as const;
export type Kind = keyof typeof KINDS;

/** The API refused or failed a request: `status` is its HTTP status (0: it was not reached). */
export class KubeApiError extends HintboxError {
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
    this.name = 'KubeApiError';
  }
}

/** The longest a response body may be (a list of a namespace's Pods fits many times over). */
const BODY_MAX = 32 * 1024 * 1024;
const REQUEST_TIMEOUT_MS = 30_000;

export class KubeApi {
  constructor(
    private readonly config: KubeConfig,
    readonly namespace: string,
  ) {}

  /** The API server's address, for messages. */
  get server(): string {
    return this.config.getCurrentCluster()?.server ?? '(no cluster in the kubeconfig)';
  }

  create(kind: Kind, body: KubeObject): Promise<KubeObject> {
    return this.request('POST', this.path(kind), `create ${kind} ${body.metadata.name}`, body) as Promise<KubeObject>;
  }

  /** The object, or undefined when it is not there (404). */
  async read(kind: Kind, name: string): Promise<KubeObject | undefined> {
    try {
      return (await this.request('GET', this.path(kind, name), `read ${kind} ${name}`)) as KubeObject;
    } catch (error) {
      if (error instanceof KubeApiError && error.status === 404) return undefined;
      throw error;
    }
  }

  /** The objects of `kind` whose labels match `selector` (`key=value,key`). */
  async list(kind: Kind, selector: string): Promise<KubeObject[]> {
    const path = `${this.path(kind)}?labelSelector=${encodeURIComponent(selector)}`;
    const list = (await this.request('GET', path, `list ${kind} ${selector}`)) as { items?: KubeObject[] };
    return list.items ?? [];
  }

  /** Deletes the object at once (no grace period); one already gone is fine. True when it was there. */
  async delete(kind: Kind, name: string): Promise<boolean> {
    try {
      await this.request('DELETE', `${this.path(kind, name)}?gracePeriodSeconds=0`, `delete ${kind} ${name}`);
      return true;
    } catch (error) {
      if (error instanceof KubeApiError && error.status === 404) return false;
      throw error;
    }
  }

  private path(kind: Kind, name?: string): string {
    const collection = KINDS[kind].replace('{ns}', encodeURIComponent(this.namespace));
    return name === undefined ? collection : `${collection}/${encodeURIComponent(name)}`;
  }

  private async request(method: string, path: string, what: string, body?: unknown): Promise<unknown> {
    const where = `${what} in namespace ${this.namespace}`;
    const cluster = this.config.getCurrentCluster();
    if (!cluster) throw new KubeApiError(`cannot ${where}: the kubeconfig names no cluster`, 0);
    const url = new URL(path, cluster.server);
    const options: https.RequestOptions = { method, headers: { accept: 'application/json' } };
    await this.config.applyToHTTPSOptions(options);
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    if (payload) Object.assign(options.headers as object, { 'content-type': 'application/json' });
    const send = url.protocol === 'https:' ? https.request : http.request;
    return new Promise((resolve, reject) => {
      const fail = (message: string, status: number): void =>
        reject(new KubeApiError(`cannot ${where}: ${message}`, status));
      const req = send(url, options, (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > BODY_MAX) return req.destroy(new Error(`the answer is larger than ${BODY_MAX} bytes`));
          chunks.push(chunk);
        });
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          const status = res.statusCode ?? 0;
          let parsed: unknown;
          try {
            parsed = text ? JSON.parse(text) : {};
          } catch (error) {
            return fail(`HTTP ${status}, not JSON (${(error as Error).message})`, status);
          }
          if (status >= 200 && status < 300) return resolve(parsed);
          const reason = (parsed as { message?: unknown }).message;
          fail(`HTTP ${status}${typeof reason === 'string' ? `: ${oneLine(reason)}` : ''}`, status);
        });
        res.on('error', (error) => fail(error.message, res.statusCode ?? 0));
      });
      req.setTimeout(REQUEST_TIMEOUT_MS, () => req.destroy(new Error(`no answer within ${REQUEST_TIMEOUT_MS} ms`)));
      req.on('error', (error) => fail(`${error.message} (the API at ${cluster.server})`, 0));
      req.end(payload);
    });
  }
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim().slice(0, 500);
}
