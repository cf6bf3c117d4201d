import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { UsageError } from '../util/hintbox-error.js';
import { LOG_FORMATS, type LogFormat, type LogLevel } from '../util/logger.js';

/**
 * The one module that reads hintbox's environment. Every variable hintbox itself reads is in
 * {@link ENVIRONMENT_VARIABLES} (which `hintbox --help` and README's table show), is parsed and
 * checked here once, and reaches the rest of the code as a field of {@link HintboxEnvironment}.
 * Variables a profile names (`${VAR}`, `database.adminUrlEnv`) are the operator's, not
 * hintbox's: they are read through {@link processVariables}.
 */

/** One variable hintbox reads: what it sets and its default, for `--help` and README. */
export interface EnvironmentVariable {
  name: string;
  meaning: string;
  default: string;
}

export const ENVIRONMENT_VARIABLES: readonly EnvironmentVariable[] = [
  {
    name: 'DOCKER_HOST',
    meaning:
      "the Docker engine, or Podman's Docker-compatible API (unix:///run/podman/podman.sock): a Unix socket on this host",
    default: 'unix:///var/run/docker.sock',
  },
  {
    name: 'HINTBOX_ENGINE',
    meaning:
      "where sandboxes run: docker (DOCKER_HOST), or kubernetes (the kubeconfig's current context: KUBECONFIG, ~/.kube/config, or the Pod's service account); --engine overrides it",
    default: 'docker',
  },
  {
    name: 'HINTBOX_GATE_IMAGE',
    meaning:
      "on Kubernetes: an image the cluster can pull holding hintbox's gate at /usr/lib/hintbox/dist/hintbox-gate (hintbox's own image)",
    default: "hintbox's own Pod's image, when it runs in one",
  },
  {
    name: 'HINTBOX_FREEZER',
    meaning:
      "how held sandboxes are frozen between calls: auto (the kernel's cgroup freezer where hintbox can write it, else the sandbox's gate), or gate (always the gate: hintbox writes no cgroup file)",
    default: 'auto',
  },
  { name: 'HINTBOX_LOG_LEVEL', meaning: 'debug, info, warn or error (the log goes to stderr)', default: 'info' },
  {
    name: 'HINTBOX_LOG_FORMAT',
    meaning: 'text, or json: one JSON object per line (time, level, component, msg)',
    default: 'text',
  },
  {
    name: 'HINTBOX_STATE_DIR',
    meaning: "hintbox's state folder (audit log, known tools)",
    default: '$XDG_STATE_HOME/hintbox',
  },
  {
    name: 'XDG_STATE_HOME',
    meaning: 'where the state folder is when HINTBOX_STATE_DIR is not set',
    default: '~/.local/state',
  },
  { name: 'HINTBOX_AUDIT_DIR', meaning: "the audit log's folder", default: 'audit/ in the state folder' },
  {
    name: 'HINTBOX_AUDIT_KEY',
    meaning: "the Ed25519 key (PEM, owner-only) that signs the audit log's checkpoints; outside the audit folder",
    default: 'audit-key.pem in the state folder, made at first use',
  },
  {
    name: 'OTEL_EXPORTER_OTLP_ENDPOINT',
    meaning:
      'an OTLP/HTTP collector: each call becomes a span sent there (or set OTEL_EXPORTER_OTLP_TRACES_ENDPOINT; the other OTEL_EXPORTER_OTLP_* variables apply)',
    default: 'none: no traces',
  },
  {
    name: 'HINTBOX_DATABASE_URL',
    meaning: 'a Postgres that hintbox run copies the audit log into (a sink)',
    default: 'none',
  },
  {
    name: 'HINTBOX_BASE_IMAGE',
    meaning: 'the Debian trixie image to build the server bases and the egress proxy on',
    default: 'debian:trixie-slim, seeded with debootstrap where it cannot be pulled',
  },
  {
    name: 'HINTBOX_IN_CONTAINER',
    meaning:
      "1: hintbox runs in a container of the engine it drives (hintbox's image sets it): serve checks that what it binds into sandboxes is at the same host path; 0: it does not",
    default: 'looked for where /.dockerenv exists',
  },
  {
    name: 'HINTBOX_DEBIAN_MIRROR',
    meaning: 'the Debian archive to seed the base image from',
    default: 'http://deb.debian.org/debian',
  },
  {
    name: 'HINTBOX_EGRESS_NETWORK',
    meaning:
      'the engine network(s), comma-separated, the egress proxies of profiles with network hosts (allow, backend) reach out on',
    default: 'bridge',
  },
  {
    name: 'HINTBOX_EGRESS_DNS',
    meaning:
      'the DNS servers (addresses, comma-separated) the egress proxies resolve listed names with; they are asked only for listed names',
    default: "the engine's (the host's resolvers)",
  },
];

/** hintbox's environment, parsed and checked. */
export interface HintboxEnvironment {
  /** `DOCKER_HOST` as given; undefined: the default socket. Checked by the Docker connection. */
  dockerHost: string | undefined;
  /** `HINTBOX_ENGINE`. Default `docker`. */
  engine: EngineKind;
  /** `HINTBOX_GATE_IMAGE`; undefined: hintbox's own Pod's image. */
  gateImage: string | undefined;
  /** `HINTBOX_FREEZER`: `auto` freezes by the cgroup freezer where it can, `gate` always by the gate. Default `auto`. */
  freezer: FreezerChoice;
  /** `HINTBOX_LOG_LEVEL`. Default `info`. */
  logLevel: LogLevel;
  /** `HINTBOX_LOG_FORMAT`. Default `text`. */
  logFormat: LogFormat;
  /** Absolute. `HINTBOX_STATE_DIR`, else `$XDG_STATE_HOME/hintbox`, else `~/.local/state/hintbox`. */
  stateDir: string;
  /** Absolute. `HINTBOX_AUDIT_DIR`, else `audit/` in the state folder. */
  auditDir: string;
  /** Absolute. `HINTBOX_AUDIT_KEY`, else `audit-key.pem` in the state folder. */
  auditKeyFile: string;
  /** Calls are traced: `OTEL_EXPORTER_OTLP_ENDPOINT` or `…_TRACES_ENDPOINT` set, and `OTEL_SDK_DISABLED` not `true`. */
  tracing: boolean;
  /** `HINTBOX_DATABASE_URL`: the Postgres the audit log is shipped to; undefined: none. */
  databaseUrl: string | undefined;
  /** `HINTBOX_BASE_IMAGE`; undefined: debian:trixie-slim (or its seed). */
  baseImage: string | undefined;
  /** `HINTBOX_DEBIAN_MIRROR`. Default `http://deb.debian.org/debian`. */
  debianMirror: string;
  /** `HINTBOX_IN_CONTAINER` (`1` or `0`); undefined: looked for (see engine/docker/own-container.ts). */
  inContainer: boolean | undefined;
  /** `HINTBOX_EGRESS_NETWORK`: the engine networks egress proxies reach out on. Default `['bridge']`. */
  egressNetworks: string[];
  /** `HINTBOX_EGRESS_DNS`: the resolvers of the egress proxies; empty: the engine's. */
  egressDns: string[];
}

/** The sandbox engines hintbox drives. */
export const ENGINE_KINDS = ['docker', 'kubernetes'] as const;
export type EngineKind = (typeof ENGINE_KINDS)[number];

/** How held sandboxes are frozen (see HINTBOX_FREEZER). */
export const FREEZER_CHOICES = ['auto', 'gate'] as const;
export type FreezerChoice = (typeof FREEZER_CHOICES)[number];

/** Variables by name, as `process.env` holds them. */
export type Variables = Readonly<Record<string, string | undefined>>;

/** A variable hintbox reads has a value it cannot use: bad usage (exit 2), one line per variable. */
export class EnvironmentError extends UsageError {
  constructor(readonly problems: string[]) {
    super(problems.join('\n'));
    this.name = 'EnvironmentError';
  }
}

const LOG_LEVELS: readonly LogLevel[] = ['debug', 'info', 'warn', 'error'];

/**
 * Parses hintbox's variables out of `variables`: every value it cannot use is a problem (all of
 * them at once), and the field keeps its default. Pure apart from the home folder.
 */
export function readEnvironment(variables: Variables): { environment: HintboxEnvironment; problems: string[] } {
  const problems: string[] = [];
  // An empty variable is an unset one (`HINTBOX_AUDIT_DIR= hintbox …`).
  const get = (name: string): string | undefined => variables[name] || undefined;

  const level = get('HINTBOX_LOG_LEVEL');
  let logLevel: LogLevel = 'info';
  if (level !== undefined) {
    if ((LOG_LEVELS as readonly string[]).includes(level)) logLevel = level as LogLevel;
    else problems.push(`HINTBOX_LOG_LEVEL: expected debug, info, warn or error, got ${JSON.stringify(level)}`);
  }

  const engineText = get('HINTBOX_ENGINE') ?? 'docker';
  const engine = (ENGINE_KINDS as readonly string[]).includes(engineText) ? (engineText as EngineKind) : 'docker';
  if (engine !== engineText) {
    problems.push(`HINTBOX_ENGINE: expected docker or kubernetes, got ${JSON.stringify(engineText)}`);
  }

  const freezerText = get('HINTBOX_FREEZER') ?? 'auto';
  const freezer = (FREEZER_CHOICES as readonly string[]).includes(freezerText)
    ? (freezerText as FreezerChoice)
    : 'auto';
  if (freezer !== freezerText) {
    problems.push(`HINTBOX_FREEZER: expected auto or gate, got ${JSON.stringify(freezerText)}`);
  }

  const format = get('HINTBOX_LOG_FORMAT');
  let logFormat: LogFormat = 'text';
  if (format !== undefined) {
    if ((LOG_FORMATS as readonly string[]).includes(format)) logFormat = format as LogFormat;
    else problems.push(`HINTBOX_LOG_FORMAT: expected text or json, got ${JSON.stringify(format)}`);
  }

  const stateBase = get('XDG_STATE_HOME') ?? path.join(os.homedir(), '.local', 'state');
  const stateDir = path.resolve(get('HINTBOX_STATE_DIR') ?? path.join(stateBase, 'hintbox'));
  const auditDir = path.resolve(get('HINTBOX_AUDIT_DIR') ?? path.join(stateDir, 'audit'));
  const auditKeyFile = path.resolve(get('HINTBOX_AUDIT_KEY') ?? path.join(stateDir, 'audit-key.pem'));

  const databaseUrl = get('HINTBOX_DATABASE_URL');
  if (databaseUrl !== undefined && !hasProtocol(databaseUrl, ['postgres:', 'postgresql:'])) {
    // The URL may hold a password: the message never quotes it.
    problems.push('HINTBOX_DATABASE_URL: expected a postgres:// or postgresql:// URL');
  }
  const debianMirror = get('HINTBOX_DEBIAN_MIRROR') ?? 'http://deb.debian.org/debian';
  if (!hasProtocol(debianMirror, ['http:', 'https:'])) {
    problems.push(`HINTBOX_DEBIAN_MIRROR: expected an http:// or https:// URL, got ${JSON.stringify(debianMirror)}`);
  }

  const egressText = get('HINTBOX_EGRESS_NETWORK') ?? 'bridge';
  const egressNetworks = egressText.split(',').map((n) => n.trim());
  if (egressNetworks.some((n) => !/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(n) || ['none', 'host'].includes(n))) {
    problems.push(
      `HINTBOX_EGRESS_NETWORK: expected engine network names, comma-separated (not none or host), got ${JSON.stringify(egressText)}`,
    );
  }

  const dnsText = get('HINTBOX_EGRESS_DNS');
  const egressDns = dnsText === undefined ? [] : dnsText.split(',').map((n) => n.trim());
  if (egressDns.some((address) => net.isIP(address) === 0)) {
    problems.push(`HINTBOX_EGRESS_DNS: expected IP addresses, comma-separated, got ${JSON.stringify(dnsText)}`);
  }

  const inContainerText = get('HINTBOX_IN_CONTAINER');
  if (inContainerText !== undefined && inContainerText !== '1' && inContainerText !== '0') {
    problems.push(`HINTBOX_IN_CONTAINER: expected 1 or 0, got ${JSON.stringify(inContainerText)}`);
  }

  return {
    environment: {
      dockerHost: get('DOCKER_HOST'),
      engine,
      gateImage: get('HINTBOX_GATE_IMAGE'),
      freezer,
      logLevel,
      logFormat,
      stateDir,
      auditDir,
      auditKeyFile,
      tracing:
        (get('OTEL_EXPORTER_OTLP_ENDPOINT') ?? get('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT')) !== undefined &&
        get('OTEL_SDK_DISABLED') !== 'true',
      databaseUrl: problems.some((p) => p.startsWith('HINTBOX_DATABASE_URL')) ? undefined : databaseUrl,
      baseImage: get('HINTBOX_BASE_IMAGE'),
      debianMirror,
      inContainer: inContainerText === '1' ? true : inContainerText === '0' ? false : undefined,
      egressNetworks,
      egressDns: problems.some((p) => p.startsWith('HINTBOX_EGRESS_DNS')) ? [] : egressDns,
    },
    problems,
  };
}

function hasProtocol(url: string, protocols: string[]): boolean {
  try {
    return protocols.includes(new URL(url).protocol);
  } catch {
    return false; // not a URL at all
  }
}

let cached: HintboxEnvironment | undefined;

/** This process's environment, read once; throws an {@link EnvironmentError} naming every bad value. */
export function hintboxEnvironment(): HintboxEnvironment {
  if (cached) return cached;
  const { environment, problems } = readEnvironment(processVariables());
  if (problems.length) throw new EnvironmentError(problems);
  return (cached = environment);
}

/**
 * The process's variables as they are, for what the operator names in a profile (`${VAR}`,
 * `database.adminUrlEnv`) and for the processes hintbox starts. hintbox's own settings are read
 * through {@link hintboxEnvironment}, never from here.
 */
export function processVariables(): Variables {
  return process.env;
}
