import { lockedPromptsOrResources, type LockFile } from '../approvals/lock-file.js';
import type { AuditLog } from '../audit/audit-record.js';
import {
  describeRejectedItem,
  listPromptsAndResources,
  NO_PROMPTS_OR_RESOURCES,
  type RejectedItem,
  type PromptsAndResources,
} from '../catalog/discover-prompts-and-resources.js';
import type { Gateway, GatewayOptions, RequestAuditEvent, Upstream } from '../gateway/gateway.js';
import { sandboxRoots } from '../gateway/server-requests.js';
import { sandboxId, strictestGrant } from '../policy/plan-sandboxes.js';
import { ceilingOf } from '../profile/profile-ceiling.js';
import type { GatewaySettings } from './session-options.js';
import type { Profile } from '../profile/load-profile.js';
import type { ServerTrustState } from '../policy/server-trust.js';
import type { Logger } from '../util/logger.js';
import { guardPromptsAndResources } from '../catalog/guarded-prompts-and-resources.js';
import { callerFields, type Caller } from '../util/caller-identity.js';

/**
 * A session's prompts, resources and resource templates: listed at discovery and again when
 * the server says they changed, shown to the client as approved (`catalog/guarded-prompts-and-resources.ts`), served
 * by the strictest sandbox. Their reads and the server's requests of the client are recorded
 * in the audit trail with the session's id.
 */
export class SessionPromptsAndResources {
  /** As the server listed them last (valid ones). */
  listed: PromptsAndResources = NO_PROMPTS_OR_RESOURCES;
  rejected: RejectedItem[] = [];
  /** A trusted server without a lock file: its offers as first listed in this run (trust on first use). */
  private readonly firstSeen = new Map<string, string>();

  constructor(
    private readonly options: {
      profile: Profile;
      session: string;
      /** The server's trust now: one that broke a hint is untrusted from then on. */
      trust: ServerTrustState;
      log: Logger;
      timeoutMs: () => number;
      /** The gateways they are served by now (one per client under serve), each with its approvals. */
      served: () => Iterable<{ gateway: Gateway; approvals: GatewaySettings['approvals'] }>;
    },
  ) {}

  /** What a cold start serves until the server is verified: the locked ones. */
  adoptLocked(lock: LockFile): void {
    this.listed = {
      prompts: lockedPromptsOrResources(lock, 'prompt') as PromptsAndResources['prompts'],
      resources: lockedPromptsOrResources(lock, 'resource') as PromptsAndResources['resources'],
      resourceTemplates: lockedPromptsOrResources(lock, 'resourceTemplate') as PromptsAndResources['resourceTemplates'],
    };
  }

  /** Lists what the server offers (the kinds it declared), validated; a malformed one is logged and left out. */
  async list(from: Upstream): Promise<void> {
    const { listed, rejected } = await listPromptsAndResources(from.client, this.options.timeoutMs());
    // At most 10 lines, however many the server made malformed.
    for (const r of rejected.slice(0, 10)) this.options.log.warn(describeRejectedItem(r));
    if (rejected.length > 10) this.options.log.warn(`and ${rejected.length - 10} more prompts or resources left out`);
    this.listed = listed;
    this.rejected = rejected;
  }

  /** Whether the server offers anything the strictest sandbox serves (prompts, resources, completions). */
  static servedBy(upstream: Upstream): boolean {
    const capabilities = upstream.client.getServerCapabilities() ?? {};
    return Boolean(capabilities.prompts || capabilities.resources || capabilities.completions);
  }

  /** What the client may see: approved ones only, with approvals; all of them without (tests of routing). */
  visible(approvals: (() => LockFile | undefined) | undefined): PromptsAndResources {
    if (!approvals) return this.listed;
    return guardPromptsAndResources({
      profile: this.options.profile,
      trusted: this.options.trust.current === 'trusted',
      listed: this.listed,
      readLock: approvals,
      firstSeen: this.firstSeen,
      log: this.options.log,
    });
  }

  /** Lists again from the sandbox that announced a change before they were served (if one did). */
  async listAgainIfChanged(from: Upstream | undefined): Promise<void> {
    if (!from?.forwarded.connected) return;
    try {
      await this.relist(from);
    } catch (error) {
      this.options.log.error(`listing the prompts and resources again failed: ${(error as Error).message}`);
    }
  }

  /** The server said they changed: listed again, and every gateway serves what it may see of them. */
  async relist(from: Upstream): Promise<void> {
    await this.list(from);
    for (const { gateway, approvals } of [...this.options.served()])
      await gateway.updatePromptsAndResources(this.visible(approvals));
  }

  /** The server lost trust: what it shows is what a person approved, from now on. */
  trustLost(): void {
    try {
      for (const { gateway, approvals } of this.options.served()) {
        // What it may no longer ask (sampling, links) is withdrawn from the client too.
        gateway.withdrawRefusedServerRequests();
        void gateway.updatePromptsAndResources(this.visible(approvals));
      }
    } catch (error) {
      this.options.log.error(
        `could not narrow what ${this.options.profile.name} shows after it lost trust: ${(error as Error).message}`,
      );
    }
  }

  /** What the gateway needs of them: what is shown, where reads run, what the server may ask, the audit. */
  gatewayOptions(
    settings: GatewaySettings,
  ): Pick<GatewayOptions, 'promptsAndResources' | 'readSandbox' | 'serverRequests' | 'roots' | 'recordRequest'> {
    const { profile } = this.options;
    const recordRequest = this.recorder(settings.audit, settings.caller);
    return {
      promptsAndResources: this.visible(settings.approvals),
      // Reads change nothing by definition: the strictest sandbox serves them, whatever the server claims.
      readSandbox: sandboxId(strictestGrant(ceilingOf(profile))),
      // Sampling and links for the person as the profile says, and never once the server broke a hint.
      serverRequests: () => {
        const kept = this.options.trust.reason === undefined;
        const asked = profile.serverRequests;
        return { ...asked, sampling: asked.sampling && kept, urlElicitation: asked.urlElicitation && kept };
      },
      // A server is told its sandboxes' folders, never the client's host paths.
      roots: () => sandboxRoots(profile.mounts),
      ...(recordRequest ? { recordRequest } : {}),
    };
  }

  /** A server's request refused because calls of several clients were in flight in its sandbox (see `SharedSandboxes`). */
  refusedUnbound(
    audit: Pick<AuditLog, 'recordEvent'> | undefined,
    sandbox: string,
    method: string,
    more: number,
  ): void {
    const also = more > 0 ? ` (and ${more} more refused so)` : '';
    this.recorder(audit)?.({
      type: 'server.request',
      ref: `${sandbox}#unbound-${Date.now()}`,
      sandbox,
      method,
      boundTo: null,
      decision: 'refused',
      reason: `calls of several clients were in flight in its sandbox${also}`,
    });
  }

  /** Records a read or a server's request in the audit trail, as this session's. */
  recorder(
    audit: Pick<AuditLog, 'recordEvent'> | undefined,
    caller?: Caller | null,
  ): ((event: RequestAuditEvent) => void) | undefined {
    if (!audit?.recordEvent) return undefined;
    const { session, profile } = this.options;
    const who = callerFields(caller);
    return (event) => audit.recordEvent?.({ ...event, session, server: profile.name, ...who });
  }
}
