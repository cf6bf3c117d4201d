import assert from 'node:assert/strict';
import { request } from 'node:http';
import os from 'node:os';
import { after, before, describe, it } from 'node:test';
import { McpHttpServer } from '../../src/serve/mcp-http-server.js';
import { silentLogger } from '../../src/util/logger.js';
import {
  parseAllowedHost,
  parseAllowedOrigin,
  RequestSite,
  type LocalEnd,
  type SiteRefusal,
} from '../../src/util/request-site.js';

/**
 * Which requests serve and the console answer: the Host that names them, the Origin of a
 * browser's page. Pure (headers and a socket's local end), then serve's endpoint on a wildcard
 * bind, reached at one of this machine's addresses.
 */
describe('the Host and Origin of a request (DNS rebinding, other sites)', () => {
  const loopback: LocalEnd = { localAddress: '127.0.0.1', localPort: 8931 };
  const site = new RequestSite();
  const kind = (s: RequestSite, headers: Record<string, string>, local: LocalEnd = loopback) =>
    s.refusal(headers, local)?.kind ?? 'ok';

  // proves: SERVE-HOST-ORIGIN
  it('answers only its own address: the one the connection reached, with its port, and localhost on loopback', () => {
    const cases: [string | undefined, LocalEnd, 'ok' | 'host'][] = [
      ['127.0.0.1:8931', loopback, 'ok'],
      ['localhost:8931', loopback, 'ok'],
      ['LOCALHOST:8931', loopback, 'ok'],
      ['rebind.attacker.test:8931', loopback, 'host'],
      ['localhost.attacker.test:8931', loopback, 'host'],
      ['127.0.0.1:8931.attacker.test', loopback, 'host'],
      ['evil.test@127.0.0.1:8931', loopback, 'host'],
      ['127.0.0.1:8932', loopback, 'host'],
      ['127.0.0.1', loopback, 'host'],
      ['localhost', loopback, 'host'],
      ['localhost.:8931', loopback, 'host'],
      ['[::1]:8931', loopback, 'host'],
      ['2130706433:8931', loopback, 'host'],
      ['127.1:8931', loopback, 'host'],
      ['', loopback, 'host'],
      [undefined, loopback, 'host'],
      // An IPv6 bind, and a dual-stack one reached over IPv4.
      ['[::1]:8931', { localAddress: '::1', localPort: 8931 }, 'ok'],
      ['localhost:8931', { localAddress: '::1', localPort: 8931 }, 'ok'],
      ['127.0.0.1:8931', { localAddress: '::ffff:127.0.0.1', localPort: 8931 }, 'ok'],
      // A wildcard bind (0.0.0.0) reached at an address of the machine: that address, not localhost.
      ['192.0.2.2:8931', { localAddress: '192.0.2.2', localPort: 8931 }, 'ok'],
      ['[fd00::2]:8931', { localAddress: 'fd00::2', localPort: 8931 }, 'ok'],
      ['localhost:8931', { localAddress: '192.0.2.2', localPort: 8931 }, 'host'],
      ['192.0.2.3:8931', { localAddress: '192.0.2.2', localPort: 8931 }, 'host'],
      ['hintbox.example.com:8931', { localAddress: '192.0.2.2', localPort: 8931 }, 'host'],
      // Port 80: a browser leaves it out.
      ['127.0.0.1', { localAddress: '127.0.0.1', localPort: 80 }, 'ok'],
      ['127.0.0.1', {}, 'host'],
    ];
    for (const [host, local, expected] of cases) {
      assert.equal(
        kind(site, host === undefined ? {} : { host }, local),
        expected,
        `${host} at ${JSON.stringify(local)}`,
      );
    }
  });

  it('answers the names the operator allows: a name at any port, or at one port', () => {
    const proxied = new RequestSite({ allowedHosts: ['Hintbox.Example.com', '127.0.0.1:9000', '[::1]'] });
    const local: LocalEnd = { localAddress: '172.17.0.2', localPort: 8931 }; // in a container
    for (const host of ['hintbox.example.com', 'hintbox.example.com:443', '127.0.0.1:9000', '[::1]:1234']) {
      assert.equal(kind(proxied, { host }, local), 'ok', host);
    }
    for (const host of ['other.example.com', 'example.com', 'x.hintbox.example.com', '127.0.0.1:9001', '127.0.0.1']) {
      assert.equal(kind(proxied, { host }, local), 'host', host);
    }
  });

  // proves: SERVE-HOST-ORIGIN
  it("refuses a page of another site: an Origin not of the request's own Host or allowed, or a cross-site fetch", () => {
    const proxied = new RequestSite({
      allowedHosts: ['hintbox.example.com'],
      allowedOrigins: ['https://app.example.com'],
    });
    const own = { host: '127.0.0.1:8931' };
    const cases: [RequestSite, Record<string, string>, 'ok' | 'origin'][] = [
      [site, { ...own, origin: 'http://127.0.0.1:8931' }, 'ok'],
      [site, { host: 'localhost:8931', origin: 'http://localhost:8931' }, 'ok'],
      [site, { ...own, origin: 'http://localhost:8931' }, 'origin'],
      [site, { ...own, origin: 'https://127.0.0.1:8931' }, 'origin'],
      [site, { ...own, origin: 'http://127.0.0.1:3000' }, 'origin'],
      [site, { ...own, origin: 'https://evil.example' }, 'origin'],
      [site, { ...own, origin: 'null' }, 'origin'],
      [site, { ...own, origin: '' }, 'origin'],
      [site, { ...own, origin: 'https://app.example.com' }, 'origin'],
      [site, { ...own, 'sec-fetch-site': 'same-origin' }, 'ok'],
      [site, { ...own, 'sec-fetch-site': 'none' }, 'ok'],
      [site, { ...own, 'sec-fetch-site': 'same-site' }, 'origin'],
      [site, { ...own, 'sec-fetch-site': 'cross-site' }, 'origin'],
      [site, own, 'ok'], // not a browser (the SDK's client): no Origin, no Sec-Fetch-Site
      [proxied, { ...own, origin: 'https://app.example.com' }, 'ok'],
      [proxied, { ...own, origin: 'https://app.example.com', 'sec-fetch-site': 'cross-site' }, 'ok'],
      [proxied, { ...own, origin: 'http://app.example.com' }, 'origin'],
      [proxied, { ...own, origin: 'https://app.example.com:8443' }, 'origin'],
      [proxied, { host: 'hintbox.example.com', origin: 'https://hintbox.example.com' }, 'ok'],
      [proxied, { host: 'hintbox.example.com', origin: 'http://hintbox.example.com' }, 'ok'],
      [proxied, { ...own, origin: 'https://hintbox.example.com' }, 'origin'],
      [proxied, { host: 'hintbox.example.com', origin: 'https://hintbox.example.com:8443' }, 'origin'],
    ];
    for (const [rules, headers, expected] of cases)
      assert.equal(kind(rules, headers), expected, JSON.stringify(headers));
  });

  it('refuses another Host with 421 before it looks at the Origin, another site with 403; one line each', () => {
    const host = site.refusal({ host: 'rebind.attacker.test:8931', origin: 'https://evil.example' }, loopback);
    assert.deepEqual(host, {
      status: 421,
      kind: 'host',
      reason: 'this server does not answer to the host "rebind.attacker.test:8931"',
    } satisfies SiteRefusal);
    const origin = site.refusal({ host: '127.0.0.1:8931', origin: `https://${'x'.repeat(300)}` }, loopback);
    assert.equal(origin?.status, 403);
    assert.ok(!origin.reason.includes('\n') && origin.reason.length < 200, origin.reason);
  });

  it('takes allowed hosts and origins as written, and refuses anything else with the value and an example', () => {
    assert.deepEqual(parseAllowedHost('hintbox.example.com'), { name: 'hintbox.example.com' });
    assert.deepEqual(parseAllowedHost('[::1]:8931'), { name: '[::1]', port: 8931 });
    assert.deepEqual(parseAllowedHost('10.0.0.5:80'), { name: '10.0.0.5', port: 80 });
    assert.equal(parseAllowedOrigin('https://app.example.com'), 'https://app.example.com');
    assert.equal(parseAllowedOrigin('http://localhost:6274'), 'http://localhost:6274');
    const refused: [(text: string) => unknown, string[]][] = [
      [
        parseAllowedHost,
        [
          '*',
          '*.example.com',
          'https://hintbox.example.com',
          'a.com/x',
          'a.com:0',
          'a.com:70000',
          '',
          '1.2.3',
          '[x]',
          'a..b',
        ],
      ],
      [
        parseAllowedOrigin,
        ['app.example.com', 'https://app.example.com/', 'https://app.example.com/x', 'ftp://a.com', 'null', '*'],
      ],
    ];
    for (const [parse, bads] of refused) {
      for (const bad of bads) {
        assert.throws(
          () => parse(bad),
          (e: Error) => e.message.startsWith(`${JSON.stringify(bad)}: expected`),
          bad,
        );
      }
    }
    assert.throws(() => new RequestSite({ allowedHosts: ['*'] }), /"\*": expected/);
  });

  describe("serve's endpoint on a wildcard bind (0.0.0.0)", () => {
    const external = Object.values(os.networkInterfaces())
      .flat()
      .find((a) => a?.family === 'IPv4' && !a.internal)?.address;
    let http: McpHttpServer;
    let port: number;
    const refusals: SiteRefusal['kind'][] = [];
    before(async () => {
      http = new McpHttpServer({
        servers: ['alpha'],
        openSession: () => Promise.reject(new Error('no session in this test')),
        denials: { deny: () => undefined },
        refused: (refusal) => refusals.push(refusal.kind),
        ready: () => ({ ready: true, servers: { alpha: 'ready' } }),
        log: silentLogger,
      });
      port = await http.listen(0, '0.0.0.0');
    });
    after(() => http.drain(0));

    const status = (address: string, host: string): Promise<number> =>
      new Promise((resolve, reject) => {
        request({ host: address, port, path: '/readyz', headers: { host } }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        })
          .on('error', reject)
          .end();
      });

    // proves: SERVE-HOST-ORIGIN
    it('answers the address of this machine a client used, and no name it was not given', async (t) => {
      assert.equal(await status('127.0.0.1', `127.0.0.1:${port}`), 200);
      assert.equal(await status('127.0.0.1', `localhost:${port}`), 200);
      assert.equal(await status('127.0.0.1', `rebind.attacker.test:${port}`), 421);
      if (external === undefined) return t.skip('this machine has no address but loopback');
      assert.equal(await status(external, `${external}:${port}`), 200);
      // Over the network, localhost is not its name; nor another address; nor a name not given.
      assert.equal(await status(external, `localhost:${port}`), 421);
      assert.equal(await status(external, `127.0.0.1:${port}`), 421);
      assert.equal(await status(external, `${os.hostname()}:${port}`), 421);
      assert.deepEqual(refusals, ['host', 'host', 'host', 'host']);
    });
  });
});
