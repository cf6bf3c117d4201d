import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import type Docker from 'dockerode';
import { parseEgressHosts } from '../../policy/egress-hosts.js';
import type { Logger } from '../../util/logger.js';
import type { EgressRequest, SessionIdentity } from '../sandbox-engine.js';
import {
  containerName,
  LABEL_CLASS,
  LABEL_OWNER_HOST,
  LABEL_OWNER_PID,
  LABEL_SERVER,
  LABEL_SESSION,
} from '../sandbox-labels.js';
import { type EgressAttachment } from './container-spec.js';
import { IMAGES_DIR, SERVER_SUITE, type ImageBuilder } from './image-builder.js';
import { EGRESS_PROXY_IMAGE, parseSquidLogLine, SQUID_PORT, squidConfig } from '../squid-config.js';
import { assertNoVolumes, imageVolumePaths, volumeMasks } from '../image-volumes.js';
import { removeContainer } from './remove-container.js';

/**
 * The egress of one sandbox class with hosts by name (profile `network: { allow, backend }`):
 * an engine network of its own that is internal (no route out) and has no gateway address (so
 * the host is not reachable on it either), and on it hintbox's egress proxy (Squid, in a
 * hardened container of its own), which is also on the outbound network and lets through only
 * the class's `host:port` entries. The sandbox joins only the internal network: the proxy is
 * its one way out. Each request the proxy decides is reported (its access log, followed).
 */

/** Labels a proxy container and a class network; their class label is `egress-<class>`. */
export const LABEL_EGRESS = 'hintbox.egress';
const READY = /Accepting HTTP Socket connections/;

/** Builds (or keeps) the proxy's image: Debian's Squid on the server suite's base. */
export function ensureEgressProxyImage(builder: ImageBuilder): Promise<void> {
  return builder.buildOn(SERVER_SUITE, EGRESS_PROXY_IMAGE, path.join(IMAGES_DIR, 'egress-proxy'));
}

export interface EgressOptions {
  docker: Docker;
  session: SessionIdentity;
  server: string;
  sandboxId: string;
  hosts: readonly string[];
  /** The engine networks the proxy reaches out on (HINTBOX_EGRESS_NETWORK; default `bridge`). */
  outbound: readonly string[];
  /** The DNS servers the proxy resolves listed names with (HINTBOX_EGRESS_DNS); empty: the engine's. */
  dns: readonly string[];
  log: Logger;
  /** Each request the proxy allowed or denied. */
  onRequest: (request: EgressRequest) => void;
  /** The proxy's log ended while it was in use (it died, or the engine dropped the stream): it was removed. */
  onLost?: () => void;
  /** Whether its session is being removed (then a proxy's end is expected, not lost). */
  closing?: () => boolean;
  /**
   * Which start of the class's egress this is (1 the first): a lost proxy's network may still
   * hold the class's running sandbox, so a new one takes another name.
   */
  generation?: number;
  startTimeoutMs: number;
}

export interface StartedEgress extends EgressAttachment {
  remove(): Promise<void>;
}

/** Creates the class's network and starts its proxy; on failure nothing is left. */
export async function startEgress(options: EgressOptions): Promise<StartedEgress> {
  const { docker, session, server, sandboxId, log } = options;
  const labels = {
    [LABEL_SESSION]: session.sessionId,
    [LABEL_SERVER]: server,
    [LABEL_CLASS]: `egress-${sandboxId}`,
    [LABEL_EGRESS]: '1',
    [LABEL_OWNER_HOST]: session.ownerHost,
    [LABEL_OWNER_PID]: String(session.ownerPid),
  };
  const generation = options.generation ?? 1;
  const name = `${containerName(session, server, sandboxId)}-egress${generation > 1 ? `-${generation}` : ''}`;
  let network: Docker.Network | undefined;
  let proxy: Docker.Container | undefined;
  let state: 'starting' | 'up' | 'removed' = 'starting';
  const remove = async (): Promise<void> => {
    state = 'removed';
    if (proxy) await removeContainer(proxy);
    await network?.remove().catch(ignoreGone);
  };
  try {
    const outbound = await Promise.all(
      options.outbound.map((id) =>
        docker
          .getNetwork(id)
          .inspect()
          .then((info) => info as NetworkInfo & { Name: string })
          .catch((error: Error) => {
            throw new Error(`the egress network ${id} (HINTBOX_EGRESS_NETWORK): ${error.message}`);
          }),
      ),
    );
    network = await docker.createNetwork({
      Name: name,
      Driver: 'bridge',
      Internal: true,
      CheckDuplicate: true,
      Labels: labels,
      // No address of the host on the sandbox's network: an internal network's gateway would be the host itself.
      Options: { 'com.docker.network.bridge.inhibit_ipv4': 'true' },
    });
    const own = (await network.inspect()) as NetworkInfo;
    const clients = subnetsOf(own);
    if (clients.length === 0) throw new Error(`the engine gave network ${name} no subnet`);
    const config = squidConfig({
      hosts: parseEgressHosts(options.hosts),
      clients,
      hostAddresses: [...gatewaysOf(own), ...outbound.flatMap(gatewaysOf), ...hostAddresses()],
    });
    // The proxy's image is hintbox's own, but its VOLUMEs are masked as a sandbox's are.
    const tmp = { '/tmp': 'rw,nosuid,nodev,noexec,size=16m' };
    const masks = volumeMasks({
      imageVolumes: imageVolumePaths((await docker.getImage(EGRESS_PROXY_IMAGE).inspect()).Config.Volumes),
      binds: [],
      tmpfs: Object.keys(tmp),
      options: tmp['/tmp'],
      what: `the egress proxy of sandbox ${sandboxId}`,
    });
    proxy = await docker.createContainer({
      name,
      Image: EGRESS_PROXY_IMAGE,
      Env: [`HINTBOX_SQUID_CONF=${config}`],
      Labels: labels,
      AttachStdout: true,
      AttachStderr: true,
      Healthcheck: { Test: ['NONE'] },
      HostConfig: {
        NetworkMode: outbound[0]?.Name ?? 'bridge',
        // On engine networks of a user's own, Docker's resolver in the container asks these.
        ...(options.dns.length > 0 ? { Dns: [...options.dns] } : {}),
        ReadonlyRootfs: true,
        CapDrop: ['ALL'],
        CapAdd: [],
        SecurityOpt: ['no-new-privileges:true'],
        Privileged: false,
        Tmpfs: { ...tmp, ...masks },
        PidsLimit: 64,
        Memory: 128 * 1024 ** 2,
        MemorySwap: 128 * 1024 ** 2,
        NanoCpus: 500_000_000,
        RestartPolicy: { Name: 'no' },
        LogConfig: { Type: 'json-file', Config: { 'max-size': '1m', 'max-file': '2' } },
      },
    });
    assertNoVolumes((await proxy.inspect()).Mounts, `the egress proxy of sandbox ${sandboxId}`);
    for (const extra of outbound.slice(1)) await docker.getNetwork(extra.Name).connect({ Container: proxy.id });
    await network.connect({ Container: proxy.id });
    // Fail closed: a proxy whose refusals hintbox can no longer see is not left to serve.
    const ready = followLog(proxy, options, log, () => {
      if (state !== 'up' || options.closing?.()) return;
      log.error(`the egress proxy of sandbox ${sandboxId} stopped reporting: removing it (no network until a new one)`);
      void remove().catch((error: Error) => log.warn(`could not remove the egress proxy ${name}: ${error.message}`));
      options.onLost?.();
    });
    await proxy.start();
    await ready;
    state = 'up';
    const info = await proxy.inspect();
    const address = info.NetworkSettings.Networks[name]?.IPAddress;
    if (!address) throw new Error(`the egress proxy has no address on ${name}`);
    log.info(`egress proxy for ${sandboxId} up: ${options.hosts.join(', ')}`);
    return { network: name, proxyUrl: `http://${address}:${SQUID_PORT}`, remove };
  } catch (error) {
    await remove();
    throw new Error(`could not start the egress proxy of sandbox ${sandboxId}: ${(error as Error).message}`);
  }
}

/**
 * Follows the proxy's output: its access log (stdout) becomes `onRequest` calls, its own log
 * (stderr) goes to the debug log. Resolves once Squid accepts connections; rejects when it ends first.
 */
function followLog(container: Docker.Container, options: EgressOptions, log: Logger, onEnd: () => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`Squid did not come up within ${options.startTimeoutMs} ms`)),
      options.startTimeoutMs,
    );
    const stderrTail: string[] = [];
    container.attach({ stream: true, stdout: true, stderr: true }, (error, stream) => {
      if (error || !stream) {
        clearTimeout(timer);
        reject(error instanceof Error ? error : new Error('no output stream from the egress proxy'));
        return;
      }
      const stdout = new PassThrough();
      const stderr = new PassThrough();
      options.docker.modem.demuxStream(stream, stdout, stderr);
      lines(stdout, (line) => {
        const request = parseSquidLogLine(line);
        if (request) options.onRequest(request);
      });
      lines(stderr, (line) => {
        log.debug(`squid: ${line}`);
        stderrTail.push(line);
        if (stderrTail.length > 10) stderrTail.shift();
        if (READY.test(line)) {
          clearTimeout(timer);
          resolve();
        }
      });
      stream.on('end', () => {
        clearTimeout(timer);
        reject(new Error(`Squid ended: ${stderrTail.join(' / ')}`));
        onEnd();
      });
    });
  });
}

function lines(stream: NodeJS.ReadableStream, onLine: (line: string) => void): void {
  let buffered = '';
  stream.on('data', (chunk: Buffer) => {
    buffered += chunk.toString('utf8');
    const parts = buffered.split('\n');
    buffered = parts.pop() ?? '';
    for (const part of parts) if (part.trim()) onLine(part.trim());
    if (buffered.length > 64 * 1024) buffered = '';
  });
}

interface NetworkInfo {
  IPAM?: { Config?: { Subnet?: string; Gateway?: string }[] };
}

function subnetsOf(network: NetworkInfo): string[] {
  return (network.IPAM?.Config ?? []).flatMap((c) => (c.Subnet ? [c.Subnet] : []));
}

/** The gateway of each subnet: as the engine says, else (a subnet given without one) the engine's choice, its first address. */
function gatewaysOf(network: NetworkInfo): string[] {
  return (network.IPAM?.Config ?? []).flatMap((c) => {
    if (c.Gateway) return [c.Gateway.replace(/\/\d+$/, '')];
    const v4 = /^(\d+)\.(\d+)\.(\d+)\.(\d+)\/(\d+)$/.exec(c.Subnet ?? '');
    if (!v4) return [];
    const base = v4.slice(1, 5).reduce((n, octet) => n * 256 + Number(octet), 0);
    const first = (base & ~(2 ** (32 - Number(v4[5])) - 1)) + 1;
    return [[24, 16, 8, 0].map((shift) => (first >>> shift) & 255).join('.')];
  });
}

/** This machine's own addresses (the engine's host, when hintbox runs on it): never reachable by name. */
function hostAddresses(): string[] {
  return Object.values(os.networkInterfaces())
    .flatMap((list) => list ?? [])
    .map((a) => a.address.replace(/%.*$/, ''));
}

/** Removing what is already gone (404) or going (409) is fine. */
function ignoreGone(error: Error & { statusCode?: number }): void {
  if (error.statusCode !== 404 && error.statusCode !== 409) throw error;
}
