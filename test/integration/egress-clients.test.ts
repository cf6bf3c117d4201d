import assert from 'node:assert/strict';
import { before, it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import type Docker from 'dockerode';
import {
  debianImage,
  NODE_SERVER_IMAGE,
  seededDebianImage,
  SERVER_SUITE,
} from '../../src/engine/docker/image-builder.js';
import { buildFixture, CANARY_IMAGE, docker, ensureEgressImage, ensureTestImages } from './support/docker.js';
import { outcomeOf, runHintbox, writeProfile } from './support/hintbox-process.js';
import { canaryCertificate } from './support/canary-tls.js';

/**
 * Egress for servers as they are written: each HTTP client a server may use, unchanged, reaches a
 * listed canary through hintbox's egress proxy (over HTTP and, in a CONNECT tunnel, HTTPS) and is
 * refused an unlisted one; a server that goes around the proxy finds no route. The canaries stand
 * on a network of this test's own (198.19.x.0/24, public-looking), as the hosts of an "internet".
 */
// 198.19.0-149.x: the gallery's canaries take 150-249.
const INTERNET = { name: `hintbox-test-clients-${process.pid}`, subnet: `198.19.${process.pid % 150}.0/24` };
const HTTP_PORT = 8080;
const TLS_PORT = 8443;
const CLIENTS_IMAGE = 'hintbox-test/egress-clients:latest';
const CLIENTS = ['fetch', 'undici', 'axios', 'got', 'http', 'curl', 'requests', 'httpx', 'urllib', 'go'] as const;

/** Answers `canary <name> <path>` over HTTP and HTTPS (its own certificate), and logs each request's path. */
const canaryScript = (name: string, key: string, cert: string): string => `
const answer = (q, r) => { console.log('request ' + q.url); r.end('canary ${name} ' + q.url); };
require('http').createServer(answer).listen(${HTTP_PORT});
require('https').createServer({ key: ${JSON.stringify(key)}, cert: ${JSON.stringify(cert)} }, answer)
  .listen(${TLS_PORT}, () => console.log('listening'));
require('net').createServer((s) => { console.log('raw connection'); s.end(); }).listen(9090);`;

/** The fixture, its Go client built on the Debian base hintbox's images use (the registry's, else the seeded one). */
const ensureClientsImage = async (): Promise<void> => {
  await ensureTestImages();
  const { docker: d } = await docker();
  const registry = await d
    .getImage(debianImage(SERVER_SUITE))
    .inspect()
    .then(
      () => true,
      () => false,
    );
  const base = registry ? debianImage(SERVER_SUITE) : seededDebianImage(SERVER_SUITE);
  await buildFixture('egress-clients', CLIENTS_IMAGE, { NODE_SERVER_IMAGE, BASE_IMAGE: base });
};

integrationSuite(
  'egress for servers as written: every HTTP client through the proxy',
  { timeout: 1_200_000, images: [ensureEgressImage, ensureClientsImage] },
  (suite) => {
    const made: { containers: Docker.Container[]; networks: Docker.Network[] } = { containers: [], networks: [] };
    const ips = new Map<string, string>();
    let profile: string;

    before(async () => {
      const { docker: d } = await docker();
      made.networks.push(
        await d.createNetwork({
          Name: INTERNET.name,
          Driver: 'bridge',
          IPAM: { Config: [{ Subnet: INTERNET.subnet }] },
          Labels: { 'hintbox-test': 'egress-clients' },
        }),
      );
      const { key, cert } = canaryCertificate();
      for (const name of ['allowed', 'unlisted']) {
        const container = await d.createContainer({
          Image: CANARY_IMAGE,
          name: `hintbox-test-clients-${name}-${process.pid}`,
          Entrypoint: ['node', '-e', canaryScript(name, key, cert)],
          Labels: { 'hintbox-test': 'egress-clients' },
          HostConfig: { NetworkMode: INTERNET.name },
          NetworkingConfig: { EndpointsConfig: { [INTERNET.name]: { Aliases: [`${name}.test`] } } },
        });
        made.containers.push(container);
        await container.start();
        const info = await container.inspect();
        ips.set(name, info.NetworkSettings.Networks[INTERNET.name]!.IPAddress);
      }
      profile = writeProfile({
        name: `clients-${process.pid}`,
        server: { image: CLIENTS_IMAGE },
        trust: 'trusted',
        env: { NODE_TLS_REJECT_UNAUTHORIZED: '0' },
        network: { allow: [`allowed.test:${HTTP_PORT}`, `allowed.test:${TLS_PORT}`] },
        limits: { memory: '512m', cpus: 1, pids: 128 },
      });
    });

    suite.defer(async () => {
      await Promise.all(made.containers.map((c) => c.remove({ force: true }).catch(() => undefined)));
      for (const n of made.networks) await n.remove().catch(() => undefined);
    });

    const env = (): Record<string, string> => ({ HINTBOX_EGRESS_NETWORK: INTERNET.name });

    /** What a canary logged: the paths it was asked for, and raw connections. */
    const canaryLog = async (name: string): Promise<string> => {
      const { docker: d } = await docker();
      const container = made.containers[['allowed', 'unlisted'].indexOf(name)]!;
      return (await d.getContainer(container.id).logs({ stdout: true, stderr: false })).toString('latin1');
    };

    // proves: EGRESS-CLIENTS
    it('each client, unchanged, reaches a listed host over HTTP and HTTPS through the proxy, and is refused an unlisted one', async () => {
      await using hintbox = await runHintbox(profile, { env: env() });
      const get = async (client: string, url: string) =>
        outcomeOf(await hintbox.client.callTool({ name: 'get', arguments: { client, url } }));
      for (const client of CLIENTS) {
        assert.deepEqual(
          await get(client, `http://allowed.test:${HTTP_PORT}/${client}`),
          { ok: true, value: `canary allowed /${client}` },
          `${client} over HTTP`,
        );
        // axios sends an HTTPS URL to an HTTP proxy as a plain GET of that URL (no tunnel): the
        // proxy forwards only plain HTTP and CONNECT, so it refuses it (docs/network.md).
        const tls = await get(client, `https://allowed.test:${TLS_PORT}/${client}-tls`);
        if (client === 'axios') assert.equal(tls.ok, false, `axios over HTTPS: ${JSON.stringify(tls)}`);
        else assert.deepEqual(tls, { ok: true, value: `canary allowed /${client}-tls` }, `${client} over HTTPS`);
        const refused = await get(client, `http://unlisted.test:${HTTP_PORT}/${client}`);
        assert.equal(refused.ok, false, `${client} to an unlisted host: ${JSON.stringify(refused)}`);
      }
      assert.doesNotMatch(await canaryLog('unlisted'), /request/, 'the unlisted canary was asked nothing');
    });

    // proves: EGRESS-ONLY-PROXY
    it('a server that goes around the proxy, by a socket of its own or a dispatcher of its own, has no route', async () => {
      await using hintbox = await runHintbox(profile, { env: env() });
      const bypass = async (how: string, host: string, port: number) =>
        outcomeOf(await hintbox.client.callTool({ name: 'bypass', arguments: { how, host, port } }));
      // The same canaries, listed or not, by address and by name: none is reached but through the proxy.
      for (const name of ['allowed', 'unlisted']) {
        for (const [how, port] of [
          ['socket', 9090],
          ['socket', HTTP_PORT],
          ['dispatcher', HTTP_PORT],
        ] as const) {
          for (const host of [ips.get(name)!, `${name}.test`]) {
            const result = await bypass(how, host, port);
            assert.equal(result.ok, false, `${how} to ${host}:${port}: ${JSON.stringify(result)}`);
          }
        }
        const log = await canaryLog(name);
        assert.doesNotMatch(log, /raw connection|bypass/, `${name}: nothing came around the proxy`);
      }
      // Control: the listed canary answers the same server through the proxy.
      const control = outcomeOf(
        await hintbox.client.callTool({
          name: 'get',
          arguments: { client: 'fetch', url: `http://allowed.test:${HTTP_PORT}/control` },
        }),
      );
      assert.deepEqual(control, { ok: true, value: 'canary allowed /control' });
    });
  },
);
