import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { before, it } from 'node:test';
import type Docker from 'dockerode';
import { integrationSuite } from './support/suite.js';
import { PROXY_UID } from '../../src/engine/docker/egress-proxy.js';
import { socketBaseDirs } from '../../src/util/unix-socket.js';
import { httpText } from './support/http-text.js';
import { CANARY_IMAGE, docker, EGRESS_IMAGE, ensureEgressImage, eventually, sandboxOfClass } from './support/docker.js';
import { outcomeOf, runHintbox, writeProfile } from './support/hintbox-process.js';

/**
 * An open-world sandbox (egress by host name) against the engine's host, on whichever engine
 * DOCKER_HOST names: a canary HTTP server of this test listens on every address of the host, and
 * the sandbox's server tries it straight (ignoring its proxy) at every address the host has and
 * at the gateway of every network the engine put the sandbox on. The sandbox has no network: its
 * proxy is reached through the gate's relay (a Unix socket), so it reaches nothing else. The
 * control with the isolation removed: a plain container on an internal engine network (what
 * hintbox used to put egress sandboxes on) reaches the canary on Podman, whose internal
 * networks' gateway is the host, and not on Docker.
 */
const PORT = 8080;

integrationSuite(
  "egress: an open-world sandbox does not reach the engine's host",
  { timeout: 300_000, images: [ensureEgressImage] },
  (suite) => {
    let hostCanary: http.Server;
    let hostPort: number;
    let hits = 0;
    let listed: Docker.Container;
    let listedIp: string;

    before(async () => {
      hostCanary = http.createServer((_, r) => (hits++, r.end('the host itself')));
      await new Promise<void>((resolve) => hostCanary.listen(0, '0.0.0.0', resolve));
      hostPort = (hostCanary.address() as AddressInfo).port;
      suite.defer(() => hostCanary.close());
      // A listed host for the control: a canary container on the engine's default network.
      const { docker: d } = await docker();
      listed = await d.createContainer({
        Image: CANARY_IMAGE,
        name: `hintbox-test-egress-host-${process.pid}`,
        Entrypoint: ['node', '-e', `require('http').createServer((q, r) => r.end('listed')).listen(${PORT})`],
        Labels: { 'hintbox-test': 'egress-host' },
      });
      suite.defer(() => listed.remove({ force: true }));
      await listed.start();
      const networks = (await listed.inspect()).NetworkSettings.Networks;
      listedIp = Object.values(networks).find((n) => n.IPAddress)?.IPAddress ?? '';
      assert.ok(listedIp, JSON.stringify(networks));
    });

    // proves: EGRESS-NO-HOST, PODMAN-NETWORKS, EGRESS-SOCKET-FOLDER
    it("an open-world sandbox gets nothing from a service on the engine's host, at any of its addresses", async () => {
      const profile = writeProfile({
        name: `egress-host-${process.pid}`,
        server: { image: EGRESS_IMAGE },
        trust: 'trusted',
        network: { allow: [`${listedIp}:${PORT}`] },
      });
      const hostAddresses = Object.values(os.networkInterfaces())
        .flatMap((list) => list ?? [])
        .filter((a) => a.family === 'IPv4')
        .map((a) => a.address);
      // Control: from the host, the canary answers at its non-loopback addresses.
      const reachable = hostAddresses.filter((a) => !a.startsWith('127.'));
      assert.ok(reachable.length > 0);
      for (const address of reachable)
        assert.equal(await httpText(`http://${address}:${hostPort}/`), 'the host itself');
      const before = hits;

      await using hintbox = await runHintbox(profile);
      const call = async (name: string, args: Record<string, unknown>) =>
        outcomeOf(await hintbox.client.callTool({ name, arguments: args }));

      // Control: the listed host answers through the proxy, so the sandbox runs and has its way out.
      let last: unknown;
      await eventually(
        async () => {
          last = await hintbox.client.callTool({ name: 'fetch', arguments: { url: `http://${listedIp}:${PORT}/` } });
          return JSON.stringify(last).includes('listed');
        },
        20_000,
        'the listed canary through the proxy',
      ).catch((error: Error) => assert.fail(`${error.message}: ${JSON.stringify(last)}`));

      // Every address of the host's, and the gateway of each network the sandbox is on (the host's, on a bridge).
      const info = await sandboxOfClass(hintbox.pid, 'nomounts-egress');
      const gateways = Object.values(info.NetworkSettings.Networks ?? {}).flatMap((n) =>
        n.Gateway ? [n.Gateway] : [],
      );
      const subnetFirst = await firstAddresses(Object.keys(info.NetworkSettings.Networks ?? {}));
      const targets = [...new Set([...hostAddresses, ...gateways, ...subnetFirst])];
      for (const address of targets) {
        const direct = await call('get', { url: `http://${address}:${hostPort}/` });
        assert.equal(direct.ok, false, `the host at ${address}: ${JSON.stringify(direct)}`);
      }
      for (const name of ['host.containers.internal', 'host.docker.internal']) {
        const byName = await call('get', { url: `http://${name}:${hostPort}/` });
        assert.equal(byName.ok, false, `the host as ${name}: ${JSON.stringify(byName)}`);
      }
      assert.equal(hits, before, 'the host canary saw no request from the sandbox');

      // The proxy's socket folder: the proxy's user owns it, the sandbox's group may pass, nobody else.
      const folders = socketBaseDirs().flatMap((dir) =>
        readdirSync(dir)
          .filter((n) => n.startsWith(`hintbox-eg-${hintbox.pid}-`))
          .map((n) => path.join(dir, n)),
      );
      assert.equal(folders.length, 1, JSON.stringify(folders));
      // Another local user (nobody, 65534) tries the proxy's socket: refused by the folder.
      const tried = spawnSync(
        process.execPath,
        [
          '-e',
          // As HTTP_PROXY would be used, straight on the socket: what comes back is printed.
          `const s = require('net').connect(process.argv[1]).on('connect', () => (console.log('connected'), s.write('GET http://${listedIp}:${PORT}/ HTTP/1.0\\r\\n\\r\\n'))).on('data', (b) => console.log(String(b).split('\\r\\n')[0])).on('error', (e) => console.log(e.code)).on('close', () => console.log('closed'))`,
          path.join(folders[0]!, readdirSync(folders[0]!)[0]!),
        ],
        { uid: 65534, gid: 65534, encoding: 'utf8', timeout: 10_000 },
      );
      assert.equal(tried.stdout.trim().split('\n')[0], 'EACCES', tried.stdout + tried.stderr);
      const folder = statSync(folders[0]!);
      // Given back to root once the proxy listens (review #5: uid 13 on the host could replace the socket).
      assert.deepEqual([folder.uid, folder.mode & 0o7777], [0, 0o710]);
      // The attack (review #5): a host process of the proxy's uid (13) replaces the socket. Refused,
      // and the socket is still there.
      const socketPath = path.join(folders[0]!, readdirSync(folders[0]!)[0]!);
      const replaced = spawnSync(
        process.execPath,
        [
          '-e',
          "try { require('fs').unlinkSync(process.argv[1]); console.log('unlinked') } catch (e) { console.log(e.code) }",
          socketPath,
        ],
        { uid: PROXY_UID, gid: PROXY_UID, encoding: 'utf8', timeout: 10_000 },
      );
      assert.equal(replaced.stdout.trim(), 'EACCES', replaced.stdout + replaced.stderr);
      assert.ok(statSync(socketPath).isSocket(), 'the socket is still there');
      // The group of the sandbox's user (its container runs as uid:gid).
      assert.equal(folder.gid, Number(info.Config.User.split(':')[1]));
      assert.equal(hits, before);
    });

    // proves: PODMAN-NETWORKS
    it('the isolation removed: a container on an internal engine network reaches the host on Podman (not on Docker)', async () => {
      const { docker: d, kind } = await docker();
      const name = `hintbox-test-internal-${process.pid}`;
      const network = await d.createNetwork({
        Name: name,
        Driver: 'bridge',
        Internal: true,
        Labels: { 'hintbox-test': 'egress-host' },
        Options: { 'com.docker.network.bridge.inhibit_ipv4': 'true' },
      });
      suite.defer(() => network.remove().catch(() => undefined));
      const info = (await network.inspect()) as { IPAM?: { Config?: { Gateway?: string }[] } };
      const targets = [
        ...new Set([
          ...Object.values(os.networkInterfaces())
            .flatMap((list) => list ?? [])
            .filter((a) => a.family === 'IPv4' && !a.internal)
            .map((a) => a.address),
          ...(info.IPAM?.Config ?? []).flatMap((c) => (c.Gateway ? [c.Gateway.replace(/\/\d+$/, '')] : [])),
          ...(await firstAddresses([name])),
        ]),
      ];
      const script = `for (const a of ${JSON.stringify(targets)}) require('http').get({ host: a, port: ${hostPort}, timeout: 3000 }, (r) => console.log(a, r.statusCode)).on('error', (e) => console.log(a, e.code))`;
      const probe = await d.createContainer({
        Image: CANARY_IMAGE,
        name: `${name}-probe`,
        Entrypoint: ['node', '-e', script],
        Labels: { 'hintbox-test': 'egress-host' },
        HostConfig: { NetworkMode: name },
      });
      suite.defer(() => probe.remove({ force: true }).catch(() => undefined));
      const before = hits;
      await probe.start();
      await probe.wait();
      const output = (await probe.logs({ stdout: true, stderr: true })).toString('latin1');
      if (kind === 'podman') assert.ok(hits > before, `Podman: the internal network reaches the host (${output})`);
      else assert.equal(hits, before, `Docker: the internal network does not reach the host (${output})`);
    });
  },
);
/** The first address of each network's subnets: where a bridge puts the host when the engine does not say. */
async function firstAddresses(networks: readonly string[]): Promise<string[]> {
  const { docker: d } = await docker();
  const out: string[] = [];
  for (const name of networks) {
    const info = (await d.getNetwork(name).inspect()) as { IPAM?: { Config?: { Subnet?: string }[] } };
    for (const c of info.IPAM?.Config ?? []) {
      const v4 = /^(\d+\.\d+\.\d+)\.0\/(\d+)$/.exec(c.Subnet ?? '');
      if (v4) out.push(`${v4[1]}.1`);
    }
  }
  return out;
}
