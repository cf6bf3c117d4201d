import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { parseEgressHosts } from '../../src/policy/egress-hosts.js';
import {
  ALWAYS_DENIED,
  SQUID_PORT,
  UNREADABLE_HOST,
  parseSquidLogLine,
  squidConfig,
} from '../../src/engine/squid-config.js';

const CONFIG = squidConfig({
  hosts: parseEgressHosts(['api.example.com:443', '*.example.com:8443', '198.51.100.7:80', '[2001:db8::1]:443']),
  clients: ['10.213.0.0/24'],
  hostAddresses: ['172.17.0.1', 'fd00::1', '192.0.2.0/24'],
  listen: 'all',
});
const LINES = CONFIG.trimEnd().split('\n');

function indexOf(line: string): number {
  const i = LINES.indexOf(line);
  assert.ok(i >= 0, `the config has the line ${line}`);
  return i;
}

function aclLine(name: string): string {
  const line = LINES.find((l) => l.startsWith(`acl ${name} `));
  assert.ok(line, `acl ${name} is defined`);
  return line;
}

describe('squidConfig', () => {
  it('orders the rules: manager, clients, protocols, addresses, the gate by text, always denied, names, deny all', () => {
    const access = LINES.filter((l) => l.startsWith('http_access '));
    assert.equal(access[0], 'http_access deny manager');
    const clients = indexOf('http_access deny !hintbox_clients');
    const protocols = indexOf('http_access deny !hintbox_http !CONNECT');
    const gate = indexOf('http_access deny !hintbox_listed_names !hintbox_listed_suffixes !hintbox_listed_addresses');
    assert.ok(clients < protocols && protocols < indexOf('http_access allow hintbox_host_2 hintbox_host_2_port'));
    assert.ok(indexOf('http_access allow hintbox_host_3 hintbox_host_3_port') < gate);
    assert.ok(gate < indexOf('http_access deny hintbox_denied'), 'nothing unlisted is resolved');
    const denied = indexOf('http_access deny hintbox_denied');
    const all = indexOf('http_access deny all');
    assert.ok(clients < indexOf('http_access allow hintbox_host_2 hintbox_host_2_port'));
    assert.ok(indexOf('http_access allow hintbox_host_3 hintbox_host_3_port') < denied);
    assert.ok(denied < indexOf('http_access allow hintbox_host_0 hintbox_host_0_port'));
    assert.ok(indexOf('http_access allow hintbox_host_1 hintbox_host_1_port') < all);
    assert.equal(access.at(-1), 'http_access deny all');
  });

  it('serves only the class network, on its port', () => {
    assert.equal(aclLine('hintbox_clients'), 'acl hintbox_clients src 10.213.0.0/24');
    indexOf(`http_port ${SQUID_PORT}`);
  });

  it('always denies loopback, link-local, private and unique-local ranges, and the host addresses', () => {
    const denied = aclLine('hintbox_denied').split(' ').slice(3);
    for (const range of [
      '169.254.0.0/16',
      '10.0.0.0/8',
      '172.16.0.0/12',
      '192.168.0.0/16',
      '127.0.0.0/8',
      'fc00::/7',
      'fe80::/10',
    ]) {
      assert.ok(ALWAYS_DENIED.includes(range), range);
      assert.ok(denied.includes(range), range);
    }
    assert.ok(denied.includes('172.17.0.1/32'));
    assert.ok(denied.includes('fd00::1/128'));
    assert.ok(denied.includes('192.0.2.0/24'), 'a subnet stays as given');
  });

  it('names each entry by kind; addresses as /32 or /128, with their port', () => {
    assert.equal(aclLine('hintbox_host_0'), 'acl hintbox_host_0 dstdomain -n api.example.com');
    assert.equal(aclLine('hintbox_host_0_port'), 'acl hintbox_host_0_port port 443');
    assert.equal(aclLine('hintbox_host_1_port'), 'acl hintbox_host_1_port port 8443');
    assert.match(aclLine('hintbox_host_2'), /^acl hintbox_host_2 dst -n 198\.51\.100\.7\/32$/);
    assert.equal(aclLine('hintbox_host_2_port'), 'acl hintbox_host_2_port port 80');
    assert.match(aclLine('hintbox_host_3'), /^acl hintbox_host_3 dst -n 2001:db8::1\/128$/);
  });

  it('a wildcard is a dstdom_regex for subdomains that does not match the apex', () => {
    const line = aclLine('hintbox_host_1');
    const match = /^acl hintbox_host_1 dstdom_regex -n -i (\S+)$/.exec(line);
    assert.ok(match, line);
    const re = new RegExp(match[1]!, 'i');
    assert.equal(re.test('a.example.com'), true);
    assert.equal(re.test('a.b.Example.COM'), true);
    assert.equal(re.test('example.com'), false);
    assert.equal(re.test('evilexample.com'), false);
    assert.equal(re.test('a.example.com.evil.test'), false);
    assert.equal(re.test('a.exampleXcom'), false, 'the dot is escaped');
  });

  it('matches names by their text only: no reverse DNS of a bare address, no lookup of an unlisted name', () => {
    for (const line of LINES.filter((l) => / (dstdomain|dstdom_regex) /.test(l))) {
      assert.match(line, / (dstdomain|dstdom_regex) -n /, line);
    }
    assert.equal(aclLine('hintbox_listed_names'), 'acl hintbox_listed_names dstdomain -n api.example.com');
    assert.equal(
      aclLine('hintbox_listed_addresses'),
      'acl hintbox_listed_addresses dst -n 198.51.100.7/32 2001:db8::1/128',
    );
    assert.match(aclLine('hintbox_listed_suffixes'), /^acl hintbox_listed_suffixes dstdom_regex -n -i \S+$/);
    // The only dst ACL that resolves is the always-denied one, and it is reached only by listed names.
    assert.deepEqual(
      LINES.filter((l) => / dst (?!-n )/.test(l)).map((l) => l.split(' ')[1]),
      ['hintbox_denied'],
    );
  });

  it('defines CONNECT itself (the file replaces Debian squid.conf) and allows no protocol but HTTP', () => {
    assert.equal(aclLine('CONNECT'), 'acl CONNECT method CONNECT');
    assert.equal(aclLine('hintbox_http'), 'acl hintbox_http proto HTTP');
    assert.ok(indexOf('http_access deny hintbox_trace') < indexOf('http_access deny all'));
  });

  it('denies addresses that hide an IPv4 one, and multicast', () => {
    for (const range of ['64:ff9b::/96', '2002::/16', '::ffff:0:0/96', '::/96', '224.0.0.0/4', '240.0.0.0/4']) {
      assert.ok(ALWAYS_DENIED.includes(range), range);
    }
  });

  // proves: EGRESS-RELAY-LOOPBACK
  it('listens on loopback only for the relayed proxy, on every address for the Kubernetes Pod', () => {
    const relayed = squidConfig({ hosts: [], clients: ['127.0.0.1/32'], hostAddresses: [], listen: 'loopback' });
    const ports = (config: string) => config.split('\n').filter((l) => l.startsWith('http_port '));
    assert.deepEqual(ports(relayed), [`http_port 127.0.0.1:${SQUID_PORT}`]);
    assert.ok(relayed.includes('acl hintbox_clients src 127.0.0.1/32\n'));
    const pod = squidConfig({ hosts: [], clients: ['0.0.0.0/0', '::/0'], hostAddresses: [], listen: 'all' });
    assert.deepEqual(ports(pod), [`http_port ${SQUID_PORT}`]);
  });

  it('without hosts, nothing is allowed', () => {
    const lines = squidConfig({ hosts: [], clients: ['10.0.0.0/24'], hostAddresses: [], listen: 'all' }).split('\n');
    const access = lines.filter((l) => l.startsWith('http_access '));
    assert.deepEqual(
      access.filter((l) => l.startsWith('http_access allow')),
      [],
    );
    assert.equal(access.at(-1), 'http_access deny all');
    assert.ok(!lines.some((l) => l.startsWith('acl hintbox_listed_')), 'no ACL without values');
  });
});

describe('parseSquidLogLine', () => {
  it('reads a denied CONNECT', () => {
    assert.deepEqual(parseSquidLogLine('hintbox-egress 1764633600.250 12 TCP_DENIED 403 CONNECT example.com 443'), {
      allowed: false,
      method: 'CONNECT',
      host: 'example.com',
      port: 443,
      startedAt: 1764633600238,
      endedAt: 1764633600250,
    });
  });

  it('reads an allowed GET and an allowed tunnel', () => {
    assert.deepEqual(parseSquidLogLine('hintbox-egress 1764633600.250 12 TCP_MISS 200 GET allowed.test 8080'), {
      allowed: true,
      method: 'GET',
      host: 'allowed.test',
      port: 8080,
      startedAt: 1764633600238,
      endedAt: 1764633600250,
    });
    assert.deepEqual(parseSquidLogLine('hintbox-egress 1764633600.250 12 TCP_TUNNEL 200 CONNECT allowed.test 8080\n'), {
      allowed: true,
      method: 'CONNECT',
      host: 'allowed.test',
      port: 8080,
      startedAt: 1764633600238,
      endedAt: 1764633600250,
    });
  });

  it('a 403 or a NONE status is not let through', () => {
    assert.equal(parseSquidLogLine('hintbox-egress 1764633600.250 12 TCP_MISS 403 GET a.test 80')?.allowed, false);
    assert.equal(parseSquidLogLine('hintbox-egress 1764633600.250 12 NONE_NONE 400 GET a.test 80')?.allowed, false);
  });

  it('a missing duration: the request started when it was logged', () => {
    const entry = parseSquidLogLine('hintbox-egress 1764633600.250 - TCP_DENIED 403 GET a.test 80');
    assert.equal(entry?.startedAt, entry?.endedAt);
  });

  it('a missing port is the method default', () => {
    assert.equal(parseSquidLogLine('hintbox-egress 1764633600.250 12 TCP_DENIED 403 CONNECT a.test -')?.port, 443);
    assert.equal(parseSquidLogLine('hintbox-egress 1764633600.250 12 TCP_DENIED 403 GET a.test -')?.port, 80);
  });

  it('reads a request the client hung up on (status 0): it went out all the same', () => {
    const entry = parseSquidLogLine('hintbox-egress 1764633600.250 1004 TCP_MISS_ABORTED 0 GET allowed.test 80');
    assert.equal(entry?.allowed, true);
    assert.equal(entry?.host, 'allowed.test');
  });

  it('an IPv6 host is its bare address, as Squid escapes its brackets', () => {
    assert.equal(
      parseSquidLogLine('hintbox-egress 1764633600.250 3 TCP_MISS 200 GET %5B2001:db8::1%5D 80')?.host,
      '2001:db8::1',
    );
    assert.equal(
      parseSquidLogLine('hintbox-egress 1764633600.250 3 TCP_TUNNEL 200 CONNECT [2001:db8::1] 443')?.host,
      '2001:db8::1',
    );
  });

  it("a line of the proxy's log that cannot be read is a refused request to an unknown host (fail closed)", () => {
    for (const line of [
      'hintbox-egress 1764633600.250 12 TCP_MISS 200 GET allowed.test',
      'hintbox-egress 1764633600.250 12 TCP_MISS 200 GET allowed.test 8080 extra',
      'hintbox-egress TCP_MISS 200 GET allowed.test 8080',
      'hintbox-egress 1764633600.250 12 TCP_MISS abc GET allowed.test 8080',
    ]) {
      assert.deepEqual(parseSquidLogLine(line), { allowed: false, method: '?', host: UNREADABLE_HOST, port: 0 }, line);
    }
  });

  it('lines of other sources are undefined', () => {
    for (const line of [
      '',
      '2026/12/01 12:00:00| Starting Squid Cache version 6',
      'other-tag TCP_MISS 200 GET a.test 80',
    ]) {
      assert.equal(parseSquidLogLine(line), undefined, line);
    }
  });
});
