import type { RequestId } from '@modelcontextprotocol/sdk/types.js';
import type { SandboxActivity } from './sandbox-activity.js';
import type { Upstream } from './sandbox-pool.js';

/** A request of the client forwarded to an upstream and not yet answered (see `forwarded-request.ts`). */
export interface ForwardedRequest {
  /** The client's id; a 2026 client's retry that answers its server's question continues it under its own (`rebind`). */
  clientId: RequestId;
  /** Its id upstream (hintbox's own); a retry gets a new one. */
  upstreamId: string;
  readonly upstream: Upstream;
  /** The sandbox's count of requests in flight; the request leaves it when it is settled. */
  readonly activity: SandboxActivity;
  readonly sandbox: string;
  /** The tool of a call, the method of a read: what the messages about it name. */
  readonly what: string;
  readonly method: string;
  /** Its params as sent upstream (with hintbox's progress token, `progressKey`). */
  readonly params: Record<string, unknown>;
  /** When it was admitted, in the process's order (the oldest call binds its server's requests). */
  readonly seq: number;
  /** When it was forwarded (ms since the epoch): what the sandbox did from then on may be its doing. */
  readonly startedAt: number;
  /** The client's progress token; upstream the request carries its first upstream id instead (`progressKey`). */
  readonly progressToken?: string | number;
  readonly progressKey?: string;
  timer?: NodeJS.Timeout;
}

/** The forwarded requests not yet answered, by hintbox's upstream id and by the client's id. */
export class PendingRequests<R extends ForwardedRequest> {
  private readonly byUpstreamId = new Map<string, R>();
  private readonly byClientId = new Map<RequestId, R>();

  add(request: R): void {
    this.byUpstreamId.set(request.upstreamId, request);
    this.byClientId.set(request.clientId, request);
  }

  /** Sent again under a new id (a retry): the old id's late answer is dropped. */
  rekey(request: R, upstreamId: string): void {
    this.byUpstreamId.delete(request.upstreamId);
    request.upstreamId = upstreamId;
    this.byUpstreamId.set(upstreamId, request);
  }

  /** A 2026 client's retry continues the request: answers and progress go to the retry's id from now on. */
  rebind(request: R, clientId: RequestId): void {
    if (this.byClientId.get(request.clientId) === request) this.byClientId.delete(request.clientId);
    request.clientId = clientId;
    this.byClientId.set(clientId, request);
  }

  /** False when it was not pending (answered once already). */
  delete(request: R): boolean {
    if (!this.byUpstreamId.delete(request.upstreamId)) return false;
    // A client that reused the id of a request in flight: the newer one keeps it.
    if (this.byClientId.get(request.clientId) === request) this.byClientId.delete(request.clientId);
    return true;
  }

  has(request: R): boolean {
    return this.byUpstreamId.get(request.upstreamId) === request;
  }

  get(upstreamId: string): R | undefined {
    return this.byUpstreamId.get(upstreamId);
  }

  ofClient(clientId: RequestId): R | undefined {
    return this.byClientId.get(clientId);
  }

  /** Every request, or those in one upstream, oldest first. */
  list(upstream?: Upstream): R[] {
    const requests = [...this.byUpstreamId.values()];
    return (upstream ? requests.filter((r) => r.upstream === upstream) : requests).sort((a, b) => a.seq - b.seq);
  }
}
