import { maxPrivilege, toolPrivilege, unenforcedDatabaseHint, type DatabasePrivilege } from './database-privilege.js';
import { claimedHints, effectiveHints, type ClaimedHints, type ToolHints } from './hints.js';

/**
 * Pure planning: discovered tools + the operator's ceiling → effective hints → sandboxes.
 * No Docker, no file system, no database here; `hintbox plan` prints the result as it is.
 */

/** A host path the operator allows, with its most permissive mode. */
export interface CeilingMount {
  source: string;
  target: string;
  mode: 'ro' | 'rw';
}

/**
 * Hosts the server may reach by name, through hintbox's egress proxy: `host:port` entries
 * (`api.example.com:443`, `*.example.com:443`, `198.51.100.7:80`, `[2001:db8::1]:443`).
 */
export interface CeilingHosts {
  /** What open-world tools may reach besides `backend`. */
  allow: readonly string[];
  /** The server's own backend: what every tool may reach, and all that closed-world tools may. */
  backend: readonly string[];
}

/** What the operator granted the server at most (from the profile). */
export interface Ceiling {
  mounts: readonly CeilingMount[];
  /** `none`, `open` (out through the host, unfiltered), or hosts by name. */
  network: 'none' | 'open' | CeilingHosts;
  /** False: one sandbox with the union of the tools' rights. */
  split: boolean;
  /** Operator overrides by tool name; they replace the server's claims field by field. */
  overrides: Readonly<Record<string, ClaimedHints | undefined>>;
  /** The profile's database privilege ceiling; absent when the profile has no database. */
  database?: DatabasePrivilege;
}

/** A tool as discovered: its name and its raw annotations (claims). */
export interface ToolClaim {
  name: string;
  annotations?: unknown;
}

/** `none`: no network; `bridge`: an open network (the engine's own bridge for hintbox's process, where no sandbox reaches another); `egress`: only hintbox's egress proxy, to `egress.hosts`. */
export type NetworkMode = 'none' | 'bridge' | 'egress';

/** What a sandbox with `network: egress` may reach through the proxy. */
export interface EgressGrant {
  /** `host:port` entries, sorted, without duplicates. */
  hosts: string[];
  /** `backend`: only the server's backend (closed-world tools); `allow`: also the open-world list. */
  scope: 'allow' | 'backend';
}

export interface SandboxMount {
  source: string;
  target: string;
  readOnly: boolean;
}

/** The rights one sandbox gets: identical grants share a container. */
export interface SandboxGrant {
  network: NetworkMode;
  /** With `network: egress`: the hosts the egress proxy lets it reach. */
  egress?: EgressGrant;
  mounts: SandboxMount[];
  /** The sandbox's database role privilege; absent when the profile has no database. */
  database?: DatabasePrivilege;
}

export interface PlannedSandbox extends SandboxGrant {
  /** Stable, readable id derived from the grant, e.g. `ro-offline`. */
  id: string;
  tools: string[];
}

/** A hint that the tool's sandbox does not make true, and why. */
export interface UnenforcedHint {
  hint: keyof ToolHints;
  reason: string;
}

export interface PlannedTool {
  name: string;
  /** What the server said (missing hints absent). */
  claimed: ClaimedHints;
  /** After the operator's overrides and the spec defaults. */
  effective: ToolHints;
  /** Whether an operator override applied. */
  overridden: boolean;
  sandbox: string;
  /** Its sandbox's network: whether data may leave the machine in its calls, whatever its hints say. */
  network: NetworkMode;
  /** True when every narrowing hint of the tool is made true by its sandbox. */
  enforced: boolean;
  unenforced: UnenforcedHint[];
}

export interface SandboxPlan {
  tools: PlannedTool[];
  sandboxes: PlannedSandbox[];
  /** Read-only mounts, no network: where discovery runs. */
  strictest: PlannedSandbox;
}

/** The grant for one tool: its hints narrow the ceiling, never widen it. */
export function grantFor(hints: ToolHints, ceiling: Ceiling): SandboxGrant {
  return {
    ...networkFor(hints.openWorldHint, ceiling.network),
    mounts: ceiling.mounts.map((m) => ({
      source: m.source,
      target: m.target,
      readOnly: m.mode === 'ro' || hints.readOnlyHint,
    })),
    ...(ceiling.database ? { database: toolPrivilege(hints, ceiling.database) } : {}),
  };
}

/**
 * The network a tool gets: open-world tools the ceiling's network (`open`: the engine's default;
 * hosts: `allow` and `backend`), closed-world ones at most the server's `backend` (none if empty).
 */
function networkFor(openWorld: boolean, network: Ceiling['network']): Pick<SandboxGrant, 'network' | 'egress'> {
  if (network === 'none') return { network: 'none' };
  if (network === 'open') return { network: openWorld ? 'bridge' : 'none' };
  return egressGrant(openWorld ? [...network.allow, ...network.backend] : network.backend, network.backend);
}

/** Egress to `hosts`, scoped `backend` when they are all the backend's; no hosts: no network. */
function egressGrant(hosts: readonly string[], backend: readonly string[]): Pick<SandboxGrant, 'network' | 'egress'> {
  const sorted = [...new Set(hosts)].sort();
  if (sorted.length === 0) return { network: 'none' };
  const scope = sorted.every((h) => backend.includes(h)) ? 'backend' : 'allow';
  return { network: 'egress', egress: { hosts: sorted, scope } };
}

/**
 * Can server code holding this grant change something outside its sandbox: a writable mount,
 * a network, a database role above read? Such a sandbox runs only while a call allowed into
 * it is in flight (held at its gate until the first, frozen between calls); the others, with
 * read-only mounts, no network and at most a read role, may run freely.
 */
export function grantCanChange(grant: SandboxGrant): boolean {
  return (
    grant.network !== 'none' ||
    grant.mounts.some((m) => !m.readOnly) ||
    (grant.database !== undefined && grant.database !== 'read')
  );
}

/** The least grant the ceiling allows: every mount read-only, no network. */
export function strictestGrant(ceiling: Ceiling): SandboxGrant {
  return {
    network: 'none',
    mounts: ceiling.mounts.map((m) => ({ source: m.source, target: m.target, readOnly: true })),
    ...(ceiling.database ? { database: 'read' as const } : {}),
  };
}

/** The union of rights of several grants over the same ceiling. */
export function unionGrant(grants: readonly SandboxGrant[], ceiling: Ceiling): SandboxGrant {
  const union = strictestGrant(ceiling);
  const hosts = grants.flatMap((g) => g.egress?.hosts ?? []);
  if (typeof ceiling.network === 'object' && hosts.length > 0)
    Object.assign(union, egressGrant(hosts, ceiling.network.backend));
  for (const grant of grants) {
    if (grant.network === 'bridge') union.network = 'bridge';
    grant.mounts.forEach((m, i) => {
      const target = union.mounts[i];
      if (target && !m.readOnly) target.readOnly = false;
    });
    if (union.database && grant.database) union.database = maxPrivilege(union.database, grant.database);
  }
  return union;
}

/**
 * `ro-offline`, `rw-online`, `nomounts-offline`, `mixed-offline` (some mounts capped ro); with a
 * database, the role's privilege follows: `ro-offline-dbread`, `rw-offline-dbappend`, ….
 */
export function sandboxId(grant: SandboxGrant): string {
  const files =
    grant.mounts.length === 0
      ? 'nomounts'
      : grant.mounts.every((m) => m.readOnly)
        ? 'ro'
        : grant.mounts.every((m) => !m.readOnly)
          ? 'rw'
          : 'mixed';
  const database = grant.database ? `-db${grant.database}` : '';
  const network =
    grant.network === 'none'
      ? 'offline'
      : grant.network === 'bridge'
        ? 'online'
        : grant.egress?.scope === 'backend'
          ? 'backend'
          : 'egress';
  return `${files}-${network}${database}`;
}

/** Equal for grants that give the same rights (same network, mounts and database privilege). */
export function grantKey(grant: SandboxGrant): string {
  return JSON.stringify([
    grant.network,
    grant.egress?.hosts ?? null,
    grant.mounts.map((m) => [m.source, m.target, m.readOnly]),
    grant.database ?? null,
  ]);
}

/** Which of a tool's narrowing hints its sandbox does not make true. */
export function unenforcedHints(hints: ToolHints, grant: SandboxGrant): UnenforcedHint[] {
  const out: UnenforcedHint[] = [];
  const writable = grant.mounts.filter((m) => !m.readOnly).map((m) => m.target);
  if (hints.readOnlyHint && writable.length > 0) {
    out.push({ hint: 'readOnlyHint', reason: `sandbox can write ${writable.join(', ')}` });
  }
  const database = grant.database ? unenforcedDatabaseHint(hints, grant.database) : undefined;
  if (database) out.push(database);
  if (!hints.readOnlyHint && !hints.destructiveHint && writable.length > 0) {
    out.push({
      hint: 'destructiveHint',
      reason: `a read-write mount cannot be limited to adding files (${writable.join(', ')})`,
    });
  }
  // The backend is the operator's word for the server's own closed domain: reaching only it keeps a closed world.
  if (!hints.openWorldHint && grant.network === 'bridge') {
    out.push({ hint: 'openWorldHint', reason: `sandbox has network (${grant.network})` });
  } else if (!hints.openWorldHint && grant.egress?.scope === 'allow') {
    out.push({ hint: 'openWorldHint', reason: 'sandbox reaches hosts besides the backend (network.allow)' });
  }
  return out;
}

/**
 * Plans the sandboxes for a server's tools. Tools whose grants are identical share one
 * sandbox; with `split: false` all share one with the union of their rights, and the tools
 * whose hints that union does not honour are marked `enforced: false`.
 */
export function planSandboxes(tools: readonly ToolClaim[], ceiling: Ceiling): SandboxPlan {
  const resolved = tools.map((tool) => {
    const claimed = claimedHints(tool.annotations);
    const override = ceiling.overrides[tool.name];
    const effective = effectiveHints(claimed, override);
    return {
      name: tool.name,
      claimed,
      effective,
      overridden: override !== undefined,
      grant: grantFor(effective, ceiling),
    };
  });

  const shared = ceiling.split
    ? undefined
    : unionGrant(
        resolved.map((t) => t.grant),
        ceiling,
      );
  const byKey = new Map<string, PlannedSandbox>();
  const planned: PlannedTool[] = resolved.map((tool) => {
    const grant = shared ?? tool.grant;
    const key = grantKey(grant);
    let sandbox = byKey.get(key);
    if (!sandbox) {
      sandbox = { id: sandboxId(grant), ...grant, tools: [] };
      byKey.set(key, sandbox);
    }
    sandbox.tools.push(tool.name);
    const unenforced = unenforcedHints(tool.effective, grant);
    return {
      name: tool.name,
      claimed: tool.claimed,
      effective: tool.effective,
      overridden: tool.overridden,
      sandbox: sandbox.id,
      network: grant.network,
      enforced: unenforced.length === 0,
      unenforced,
    };
  });

  const strictest = strictestGrant(ceiling);
  return {
    tools: planned,
    sandboxes: [...byKey.values()],
    strictest: byKey.get(grantKey(strictest)) ?? { id: sandboxId(strictest), ...strictest, tools: [] },
  };
}
