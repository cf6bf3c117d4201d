/**
 * The restricted Pod Security Standard (kubernetes.io/docs/concepts/security/pod-security-standards,
 * baseline and restricted levels, as of v1.33), written as checks over a Pod spec: what an
 * admission controller enforcing `restricted` would refuse. Pure; each problem is one line
 * naming the field. The table is the standard's list, one row a control, so a row missing here
 * is visible by reading it.
 */

type Json = Record<string, unknown>;
type Container = Json & { name?: string; securityContext?: Json };

/** Volume types the restricted level allows (everything else, hostPath first, is refused). */
const ALLOWED_VOLUMES = [
  'configMap',
  'csi',
  'downwardAPI',
  'emptyDir',
  'ephemeral',
  'persistentVolumeClaim',
  'projected',
  'secret',
];
/** Sysctls the baseline level allows. */
const SAFE_SYSCTLS = [
  'kernel.shm_rmid_forced',
  'net.ipv4.ip_local_port_range',
  'net.ipv4.ip_unprivileged_port_start',
  'net.ipv4.tcp_syncookies',
  'net.ipv4.ping_group_range',
  'net.ipv4.ip_local_reserved_ports',
  'net.ipv4.tcp_keepalive_time',
  'net.ipv4.tcp_fin_timeout',
  'net.ipv4.tcp_keepalive_intvl',
  'net.ipv4.tcp_keepalive_probes',
];

/** A check of the whole Pod spec. */
const POD_CHECKS: [string, (spec: Json) => string | undefined][] = [
  ['hostNetwork', (s) => (s.hostNetwork === true ? 'must not be true' : undefined)],
  ['hostPID', (s) => (s.hostPID === true ? 'must not be true' : undefined)],
  ['hostIPC', (s) => (s.hostIPC === true ? 'must not be true' : undefined)],
  ['securityContext.windowsOptions.hostProcess', (s) => (ctx(s).windowsOptions ? 'must be unset' : undefined)],
  ['securityContext.runAsUser', (s) => (ctx(s).runAsUser === 0 ? 'must not be 0' : undefined)],
  ['securityContext.runAsNonRoot', (s) => (ctx(s).runAsNonRoot === false ? 'must not be false' : undefined)],
  ['securityContext.seccompProfile.type', (s) => seccomp(ctx(s).seccompProfile, true)],
  ['securityContext.appArmorProfile.type', (s) => appArmor(ctx(s).appArmorProfile)],
  ['securityContext.seLinuxOptions', (s) => seLinux(ctx(s).seLinuxOptions)],
  [
    'securityContext.sysctls',
    (s) => {
      const bad = ((ctx(s).sysctls as Json[] | undefined) ?? []).filter((x) => !SAFE_SYSCTLS.includes(String(x.name)));
      return bad.length ? `unsafe: ${bad.map((x) => String(x.name)).join(', ')}` : undefined;
    },
  ],
];

/** A check of one container (init, regular or ephemeral), given the Pod's own context. */
const CONTAINER_CHECKS: [string, (c: Container, pod: Json) => string | undefined][] = [
  ['securityContext.privileged', (c) => (cctx(c).privileged === true ? 'must not be true' : undefined)],
  [
    'securityContext.allowPrivilegeEscalation',
    (c) => (cctx(c).allowPrivilegeEscalation === false ? undefined : 'must be false'),
  ],
  ['securityContext.capabilities.drop', (c) => ((caps(c).drop ?? []).includes('ALL') ? undefined : 'must include ALL')],
  [
    'securityContext.capabilities.add',
    (c) => ((caps(c).add ?? []).some((x) => x !== 'NET_BIND_SERVICE') ? 'may add only NET_BIND_SERVICE' : undefined),
  ],
  [
    'securityContext.runAsNonRoot',
    (c, pod) =>
      cctx(c).runAsNonRoot === true || (cctx(c).runAsNonRoot === undefined && pod.runAsNonRoot === true)
        ? undefined
        : 'must be true (here or in the Pod)',
  ],
  ['securityContext.runAsUser', (c) => (cctx(c).runAsUser === 0 ? 'must not be 0' : undefined)],
  [
    'securityContext.seccompProfile.type',
    (c, pod) =>
      seccomp(cctx(c).seccompProfile, false) ??
      (cctx(c).seccompProfile ? undefined : seccomp(pod.seccompProfile, true)),
  ],
  ['securityContext.appArmorProfile.type', (c) => appArmor(cctx(c).appArmorProfile)],
  ['securityContext.seLinuxOptions', (c) => seLinux(cctx(c).seLinuxOptions)],
  [
    'securityContext.procMount',
    (c) => (cctx(c).procMount === undefined || cctx(c).procMount === 'Default' ? undefined : 'must be Default'),
  ],
  ['securityContext.windowsOptions.hostProcess', (c) => (cctx(c).windowsOptions ? 'must be unset' : undefined)],
  [
    'ports[].hostPort',
    (c) => (((c.ports as Json[] | undefined) ?? []).some((p) => p.hostPort) ? 'must be unset or 0' : undefined),
  ],
];

/**
 * Every way `spec` (a Pod's spec, or a Deployment's `spec.template.spec`) breaks the restricted
 * Pod Security level, one line each (`containers[server].securityContext.privileged: must not be
 * true`); empty when it complies.
 */
export function restrictedViolations(spec: Json): string[] {
  const problems: string[] = [];
  for (const [field, check] of POD_CHECKS) {
    const problem = check(spec);
    if (problem) problems.push(`${field}: ${problem}`);
  }
  for (const volume of (spec.volumes as Json[] | undefined) ?? []) {
    const type = Object.keys(volume).find((k) => k !== 'name');
    if (!type || !ALLOWED_VOLUMES.includes(type)) {
      problems.push(`volumes[${String(volume.name)}]: type ${type ?? '(none)'} is not allowed`);
    }
  }
  const podContext = ctx(spec);
  for (const list of ['initContainers', 'containers', 'ephemeralContainers']) {
    for (const container of (spec[list] as Container[] | undefined) ?? []) {
      for (const [field, check] of CONTAINER_CHECKS) {
        const problem = check(container, podContext);
        if (problem) problems.push(`${list}[${container.name ?? '?'}].${field}: ${problem}`);
      }
    }
  }
  return problems;
}

function ctx(spec: Json): Json {
  return (spec.securityContext as Json | undefined) ?? {};
}
function cctx(c: Container): Json {
  return c.securityContext ?? {};
}
function caps(c: Container): { add?: string[]; drop?: string[] } {
  return (cctx(c).capabilities as { add?: string[]; drop?: string[] } | undefined) ?? {};
}
function seccomp(profile: unknown, required: boolean): string | undefined {
  const type = (profile as Json | undefined)?.type;
  if (type === undefined) return required ? 'must be RuntimeDefault or Localhost' : undefined;
  return type === 'RuntimeDefault' || type === 'Localhost' ? undefined : 'must be RuntimeDefault or Localhost';
}
function appArmor(profile: unknown): string | undefined {
  return (profile as Json | undefined)?.type === 'Unconfined' ? 'must not be Unconfined' : undefined;
}
function seLinux(options: unknown): string | undefined {
  if (!options) return undefined;
  const o = options as Json;
  if (o.user || o.role) return 'user and role must be unset';
  const allowed = [undefined, '', 'container_t', 'container_init_t', 'container_kvm_t', 'container_engine_t'];
  return allowed.includes(o.type as string | undefined) ? undefined : `type ${String(o.type)} is not allowed`;
}
