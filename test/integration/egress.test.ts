import assert from 'node:assert/strict';
import http from 'node:http';
import { readdirSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { before, it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { httpText as get } from './support/http-text.js';
import type Docker from 'dockerode';
import { LABEL_EGRESS } from '../../src/engine/docker/egress-proxy.js';
import { socketBaseDirs } from '../../src/util/unix-socket.js';
import { LABEL_OWNER_PID, LABEL_SESSION } from '../../src/engine/sandbox-labels.js';
import { CANARY_IMAGE, containersOf, docker, EGRESS_IMAGE, ensureEgressImage, eventually } from './support/docker.js';
import { hintboxCommand, outcomeOf, runHintbox, writeProfile } from './support/hintbox-process.js';

/**
 * Network by host name, against a test "internet" this test makes on this machine only: engine
 * networks of its own (a public-looking 198.18.x.0/24, a private 10.213.x.0/24, a link-local
 * 169.254.169.0/24 with a canary at the cloud metadata address) with canary HTTP servers on them.
 * Every refusal is paired with a control that shows the same canary answering where it may.
 */
const X = 40 + (process.pid % 200);
// Its name ends in a listed wildcard's domain: the engine's DNS names every container on it
// `<container>.<network>` by reverse lookup, as the owner of an address on the internet names it as they like.
const INTERNET = { name: `hintbox-test-internet-${process.pid}.wild.test`, subnet: `198.18.${X}.0/24` };
const PRIVATE = { name: `hintbox-test-private-${process.pid}`, subnet: `10.213.${X}.0/24` };
const METADATA = { name: `hintbox-test-metadata-${process.pid}`, subnet: '169.254.169.0/24' };
const PRIVATE_IP = `10.213.${X}.5`;
const METADATA_IP = '169.254.169.254';
/** The DNS server the proxies are given (HINTBOX_EGRESS_DNS): it logs every name it is asked. */
const DNS_IP = `198.18.${X}.53`;
const PORT = 8080;

/** Answers every request with its own name: a canary tells which host a request reached. */
const canaryScript = (name: string): string =>
  `require('http').createServer((q, r) => r.end('canary ${name} ' + q.url)).listen(${PORT}, () => console.log('listening'))`;

/** A DNS server that prints each name it is asked for (`asked <name>`) and answers that it does not exist. */
const dnsCanaryScript = `
const socket = require('dgram').createSocket('udp4');
socket.on('message', (query, from) => {
  const labels = [];
  for (let i = 12; i < query.length && query[i] !== 0; i += query[i] + 1) labels.push(query.subarray(i + 1, i + 1 + query[i]).toString());
  console.log('asked ' + labels.join('.').toLowerCase());
  const answer = Buffer.from(query);
  answer.writeUInt16BE(0x8183, 2); // a response, recursion available, NXDOMAIN
  answer.writeUInt16BE(0, 6); answer.writeUInt16BE(0, 8); answer.writeUInt16BE(0, 10);
  socket.send(answer, from.port, from.address);
});
socket.bind(53, () => console.log('listening'));`;

interface Canary {
  name: string;
  network: string;
  ip?: string;
  aliases?: string[];
  script?: string;
}

integrationSuite(
  'network by host name: the egress proxy',
  {
    timeout: 600_000,
    images: [ensureEgressImage],
    // Not the relay: the test's hosts are names only Docker's embedded DNS serves (network
    // aliases); on Podman the proxy's lookup of allowed.test times out (ETIMEDOUT), while a
    // request by address gets Squid's 403 back through the relay. egress-host and egress-clients
    // run egress on Podman.
    skip: (await docker()).kind === 'podman' ? "Podman: the test's host names are Docker DNS aliases" : false,
  },
  (suite) => {
    const made: { containers: Docker.Container[]; networks: Docker.Network[] } = { containers: [], networks: [] };
    const ips = new Map<string, string>();
    let hostListener: http.Server;
    let hostPort: number;
    let gateway: string;
    let profile: string;

    before(async () => {
      const { docker: d } = await docker();
      for (const net of [INTERNET, PRIVATE, METADATA]) {
        made.networks.push(
          await d.createNetwork({
            Name: net.name,
            Driver: 'bridge',
            IPAM: { Config: [{ Subnet: net.subnet }] },
            Labels: { 'hintbox-test': 'egress' },
          }),
        );
      }
      // A subnet given without a gateway: the engine takes its first address (and does not say so in inspect).
      gateway = `198.18.${X}.1`;
      const canaries: Canary[] = [
        { name: 'allowed', network: INTERNET.name, aliases: ['allowed.test', 'a.wild.test'] },
        { name: 'unlisted', network: INTERNET.name, aliases: ['unlisted.test'] },
        { name: 'backend', network: INTERNET.name, aliases: ['backend.test'] },
        { name: 'private', network: PRIVATE.name, ip: PRIVATE_IP, aliases: ['private.test'] },
        { name: 'metadata', network: METADATA.name, ip: METADATA_IP },
        { name: 'dns', network: INTERNET.name, ip: DNS_IP, script: dnsCanaryScript },
      ];
      for (const canary of canaries) {
        const container = await d.createContainer({
          Image: CANARY_IMAGE,
          name: `hintbox-test-canary-${canary.name}-${process.pid}`,
          Entrypoint: ['node', '-e', canary.script ?? canaryScript(canary.name)],
          Labels: { 'hintbox-test': 'egress' },
          HostConfig: { NetworkMode: canary.network },
          NetworkingConfig: {
            EndpointsConfig: {
              [canary.network]: {
                Aliases: canary.aliases ?? [],
                ...(canary.ip ? { IPAMConfig: { IPv4Address: canary.ip } } : {}),
              },
            },
          },
        });
        made.containers.push(container);
        await container.start();
        const info = await container.inspect();
        ips.set(canary.name, info.NetworkSettings.Networks[canary.network]!.IPAddress);
      }
      // A service of the engine's host, on every address: what a sandbox must not reach through the gateway.
      hostListener = http.createServer((_, r) => r.end('the host itself'));
      await new Promise<void>((resolve) => hostListener.listen(0, '0.0.0.0', resolve));
      hostPort = (hostListener.address() as AddressInfo).port;
      // Controls: every canary, and the host's service at the gateway, answer whoever may reach them.
      for (const [name, ip] of ips) {
        if (name === 'dns') continue;
        await eventually(
          async () => (await get(`http://${ip}:${PORT}/`)) === `canary ${name} /`,
          20_000,
          `canary ${name}`,
        );
      }
      assert.equal(await get(`http://${gateway}:${hostPort}/`), 'the host itself');

      profile = writeProfile({
        name: `egress-${process.pid}`,
        server: { image: EGRESS_IMAGE },
        trust: 'trusted',
        network: {
          allow: [
            `allowed.test:${PORT}`,
            `*.wild.test:${PORT}`,
            `private.test:${PORT}`,
            `${METADATA_IP}:${PORT}`,
            `elsewhere-${process.pid}.test:${PORT}`, // on no engine network: the DNS canary is asked
          ],
          backend: [`backend.test:${PORT}`],
        },
      });
    });

    suite.defer(async () => {
      hostListener?.close();
      await Promise.all(made.containers.map((c) => c.remove({ force: true }).catch(() => undefined)));
      for (const n of made.networks) await n.remove().catch(() => undefined);
    });

    const env = (): Record<string, string> => ({
      HINTBOX_EGRESS_NETWORK: [INTERNET.name, PRIVATE.name, METADATA.name].join(','),
      HINTBOX_EGRESS_DNS: DNS_IP,
    });

    /** The names the DNS canary was asked for so far. */
    const askedNames = async (): Promise<string[]> => {
      const { docker: d } = await docker();
      const dns = made.containers[made.containers.length - 1]!;
      const logs = (await d.getContainer(dns.id).logs({ stdout: true, stderr: false })).toString('latin1');
      return [...logs.matchAll(/asked (\S+)/g)].map((m) => m[1]!);
    };

    it('plans the hosts each sandbox reaches: open-world tools allow and backend, closed-world ones the backend', async () => {
      const { code, stdout, stderr } = await hintboxCommand(['plan', profile], env());
      assert.equal(code, 0, stderr);
      assert.match(
        stdout,
        /sandbox nomounts-egress: network only through hintbox's egress proxy, to \*\.wild\.test:8080, 169\.254\.169\.254:8080, allowed\.test:8080, backend\.test:8080, elsewhere-\d+\.test:8080, private\.test:8080;/,
      );
      assert.match(
        stdout,
        /sandbox nomounts-backend: network only through hintbox's egress proxy, to backend\.test:8080;.*tools: backend_fetch/,
      );
    });

    // proves: EGRESS-HOSTS
    it('lets an open-world tool reach only listed hosts, through the proxy alone', async () => {
      await using hintbox = await runHintbox(profile, { env: env() });
      const call = async (name: string, args: Record<string, unknown>) =>
        outcomeOf(await hintbox.client.callTool({ name, arguments: args }));

      // Listed: a plain GET, a CONNECT tunnel (as HTTPS goes), a subdomain of a wildcard.
      assert.deepEqual((await call('fetch', { url: `http://allowed.test:${PORT}/hi` })).value, {
        status: 200,
        body: 'canary allowed /hi',
      });
      assert.deepEqual(await call('tunnel', { target: `allowed.test:${PORT}` }), {
        ok: true,
        value: { status: 200, body: 'canary allowed /' },
      });
      assert.deepEqual((await call('fetch', { url: `http://a.wild.test:${PORT}/w` })).value, {
        status: 200,
        body: 'canary allowed /w',
      });

      // Not listed, or listed only by a name that leads to an address no sandbox may reach: 403.
      const refused = async (url: string) => {
        const result = await call('fetch', { url });
        assert.equal(
          (result.value as { status?: number } | undefined)?.status,
          403,
          `${url}: ${JSON.stringify(result)}`,
        );
      };
      await refused(`http://unlisted.test:${PORT}/`);
      // A bare address is not matched by the name its reverse DNS gives (here `…wild.test`, a listed wildcard).
      await refused(`http://${ips.get('unlisted')}:${PORT}/`);
      await refused(`http://${ips.get('allowed')}:${PORT}/`);
      // Only HTTP and CONNECT: not the proxy's own cache manager, not FTP, even to a listed host and port.
      await refused(`cache_object://allowed.test:${PORT}/info`);
      await refused(`ftp://allowed.test:${PORT}/`);
      await refused(`http://allowed.test:${PORT + 1}/`);
      await refused(`http://private.test:${PORT}/`); // listed by name, but the name is a private address
      await refused(`http://${gateway}:${hostPort}/`); // the engine's gateway: the host
      assert.deepEqual((await call('tunnel', { target: `unlisted.test:${PORT}` })).value, { status: 403 });

      // DNS carries nothing out: a name no entry lists is never looked up, not even to be refused.
      // The control: a listed name that no engine network knows is asked of the DNS server.
      const secret = `secret-${process.pid}.exfil.test`;
      await refused(`http://${secret}:${PORT}/`);
      assert.deepEqual((await call('tunnel', { target: `tunnel-${secret}:${PORT}` })).value, { status: 403 });
      const elsewhere = await call('fetch', { url: `http://elsewhere-${process.pid}.test:${PORT}/` });
      assert.notEqual((elsewhere.value as { status?: number } | undefined)?.status, 200, JSON.stringify(elsewhere));
      await eventually(
        async () => (await askedNames()).includes(`elsewhere-${process.pid}.test`),
        10_000,
        'the DNS server asked for the listed name',
      );
      const asked = await askedNames();
      assert.ok(!asked.some((name) => name.includes('exfil')), `names asked: ${asked.join(', ')}`);
      // The metadata address is denied unless listed by address, as this profile does: then it answers.
      assert.deepEqual((await call('fetch', { url: `http://${METADATA_IP}:${PORT}/latest` })).value, {
        status: 200,
        body: 'canary metadata /latest',
      });

      // Around the proxy there is no route: a direct connection to a canary fails, and so does DNS.
      for (const ip of [ips.get('allowed'), ips.get('unlisted'), gateway, PRIVATE_IP, METADATA_IP]) {
        const direct = await call('direct', { host: ip, port: PORT });
        assert.equal(direct.ok, false, `direct to ${ip}: ${JSON.stringify(direct)}`);
      }
      const direct = await call('direct', { host: gateway, port: hostPort });
      assert.equal(direct.ok, false, `the host through the gateway: ${JSON.stringify(direct)}`);
      for (const name of ['allowed.test', 'unlisted.test']) {
        const resolved = await call('resolve', { name });
        assert.equal(resolved.ok, false, `DNS for ${name}: ${JSON.stringify(resolved)}`);
      }

      // Each refusal is in the audit trail, with the tool in flight, the host and the port.
      const denials = (await eventsOf(`egress-${process.pid}`)).filter((e) => e.type === 'egress.denied');
      assert.ok(
        denials.some((d) => d.fields.tool === 'fetch' && d.fields.host === 'unlisted.test' && d.fields.port === PORT),
        JSON.stringify(denials),
      );
      assert.ok(
        denials.some((d) => d.fields.tool === 'tunnel' && d.fields.host === 'unlisted.test'),
        JSON.stringify(denials),
      );
      assert.ok(denials.some((d) => d.fields.host === 'private.test'));

      // The sandbox is on no network at all: the proxy is reached through its gate's relay
      // (127.0.0.1:3128 in the sandbox, the proxy's Unix socket bound read-only).
      const { docker: d } = await docker();
      const sandboxes = await containersOf(hintbox.pid, false);
      const sandbox = sandboxes.find((c) => c.Labels['hintbox.class'] === 'nomounts-egress');
      assert.ok(sandbox, JSON.stringify(sandboxes.map((c) => c.Labels)));
      const inspected = await d.getContainer(sandbox.Id).inspect();
      assert.equal(inspected.HostConfig.NetworkMode, 'none');
      assert.ok(
        Object.values(inspected.NetworkSettings.Networks ?? {}).every((n) => !n.IPAddress),
        JSON.stringify(inspected.NetworkSettings.Networks),
      );
      assert.ok(inspected.Mounts.some((m) => m.Destination === '/run/hintbox/egress' && m.RW === false));
    });

    it('removes a proxy it no longer hears from: its sandbox is left without a way out, not unwatched', async () => {
      await using hintbox = await runHintbox(profile, { env: env() });
      const fetch = async (url: string) =>
        outcomeOf(await hintbox.client.callTool({ name: 'fetch', arguments: { url } }));
      assert.deepEqual((await fetch(`http://allowed.test:${PORT}/before`)).value, {
        status: 200,
        body: 'canary allowed /before',
      });
      const { docker: d } = await docker();
      const proxies = await d.listContainers({
        all: true,
        filters: { label: [LABEL_EGRESS, `${LABEL_OWNER_PID}=${hintbox.pid}`, 'hintbox.class=egress-nomounts-egress'] },
      });
      assert.equal(proxies.length, 1, JSON.stringify(proxies.map((p) => p.Names)));
      // Its log ends (here: it is killed): hintbox removes what is left of it.
      await d.getContainer(proxies[0]!.Id).kill();
      await eventually(
        async () => (await d.listContainers({ all: true, filters: { id: [proxies[0]!.Id] } })).length === 0,
        15_000,
        'the dead proxy removed by hintbox',
      );
      const after = await fetch(`http://allowed.test:${PORT}/after`);
      assert.notEqual((after.value as { status?: number } | undefined)?.status, 200, JSON.stringify(after));

      // The class's next sandbox (this one dies) gets a proxy of its own again, with a new socket.
      const sandbox = (await containersOf(hintbox.pid, false)).find(
        (c) => c.Labels['hintbox.class'] === 'nomounts-egress',
      );
      assert.ok(sandbox, 'the sandbox still runs');
      await d.getContainer(sandbox.Id).kill();
      await hintbox.client
        .callTool({ name: 'fetch', arguments: { url: 'http://allowed.test/' } })
        .catch(() => undefined);
      assert.deepEqual((await fetch(`http://allowed.test:${PORT}/again`)).value, {
        status: 200,
        body: 'canary allowed /again',
      });
    });

    it('sweeps the proxies and socket folders of a run killed with SIGKILL at the next start', async () => {
      const killed = await runHintbox(profile, { env: env() });
      const { docker: d } = await docker();
      const ofKilled = [LABEL_SESSION, `${LABEL_OWNER_PID}=${killed.pid}`];
      const proxies = () => d.listContainers({ all: true, filters: { label: [...ofKilled, LABEL_EGRESS] } });
      const folders = () =>
        socketBaseDirs().flatMap((dir) => readdirSync(dir).filter((n) => n.startsWith(`hintbox-eg-${killed.pid}-`)));
      try {
        const fetched = outcomeOf(
          await killed.client.callTool({ name: 'fetch', arguments: { url: `http://allowed.test:${PORT}/` } }),
        );
        assert.equal((fetched.value as { status?: number } | undefined)?.status, 200, JSON.stringify(fetched));
        process.kill(killed.pid, 'SIGKILL');
        await killed.exited;
        // The open-world class's proxy and the backend class's, each with its socket folder.
        assert.equal((await proxies()).length, 2, 'SIGKILL leaves the proxies');
        assert.equal(folders().length, 2, 'SIGKILL leaves their socket folders');

        const { code, stderr } = await hintboxCommand(['plan', profile], env());
        assert.equal(code, 0, stderr);
        assert.deepEqual(await proxies(), [], 'the next start swept the proxies');
        assert.deepEqual(folders(), [], 'and their socket folders');
        assert.deepEqual(await d.listNetworks({ filters: { label: ofKilled } }), [], 'no network was made');
      } finally {
        // Whatever failed above: nothing of the killed run may stay attached to this test's networks.
        await killed.client.close().catch(() => undefined);
        for (const c of await d.listContainers({ all: true, filters: { label: ofKilled } })) {
          await d
            .getContainer(c.Id)
            .remove({ force: true })
            .catch(() => undefined);
        }
      }
    });

    // proves: EGRESS-BACKEND
    it("lets a closed-world tool reach the server's backend and nothing else; trying is a hint violation", async () => {
      const hintbox = await runHintbox(profile, { env: env() });
      const pid = hintbox.pid;
      try {
        const call = async (args: Record<string, unknown>) =>
          outcomeOf(await hintbox.client.callTool({ name: 'backend_fetch', arguments: args }));
        assert.deepEqual((await call({ url: `http://backend.test:${PORT}/rows` })).value, {
          status: 200,
          body: 'canary backend /rows',
        });
        assert.equal(hintbox.asked.length, 0, 'a trusted server, a read-only closed-world tool: no confirmation');
        // allowed.test is on the open-world list, not the backend: refused, and a broken openWorldHint.
        assert.equal(
          ((await call({ url: `http://allowed.test:${PORT}/` })).value as { status?: number } | undefined)?.status,
          403,
        );
        await eventually(
          async () =>
            (await eventsOf(`egress-${process.pid}`)).some(
              (e) =>
                e.type === 'hint.violation' &&
                e.fields.tool === 'backend_fetch' &&
                /openWorldHint: .*allowed\.test:8080/.test(String(e.fields.violation)),
            ),
          10_000,
          'the violation in the audit trail',
        );
        // Untrusted from now on: the next call needs a person.
        await call({ url: `http://backend.test:${PORT}/again` });
        assert.equal(hintbox.asked.length, 1, 'the server lost its trust');
      } finally {
        await hintbox[Symbol.asyncDispose]();
      }
      // Its proxies went with the session (and no network was made).
      const { docker: d } = await docker();
      await eventually(
        async () =>
          (await d.listNetworks({ filters: { label: [LABEL_SESSION, `${LABEL_OWNER_PID}=${pid}`] } })).length === 0,
        15_000,
        "the session's networks removed",
      );
      const proxies = await d.listContainers({
        all: true,
        filters: { label: [LABEL_EGRESS, `${LABEL_OWNER_PID}=${pid}`] },
      });
      assert.deepEqual(proxies, []);
      const folders = socketBaseDirs().flatMap((dir) =>
        readdirSync(dir).filter((n) => n.startsWith(`hintbox-eg-${pid}-`)),
      );
      assert.deepEqual(folders, [], "and the proxies' socket folders");
    });
  },
);

/** The audit trail's events of a server (`hintbox audit --events --json`), newest first. */
async function eventsOf(server: string): Promise<{ type: string; fields: Record<string, unknown> }[]> {
  const { code, stdout, stderr } = await hintboxCommand(['audit', '--server', server, '--events', '--all', '--json']);
  assert.equal(code, 0, stderr);
  return stdout
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as { kind: string; type: string; fields: Record<string, unknown> })
    .filter((entry) => entry.kind === 'event');
}
