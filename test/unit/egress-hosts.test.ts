import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  formatEgressHost,
  matchesEgressHost,
  parseEgressHost,
  parseEgressHosts,
  type EgressHost,
} from '../../src/policy/egress-hosts.js';

function parsed(entry: string): EgressHost {
  const result = parseEgressHost(entry);
  assert.ok(!('error' in result), `${entry} parses (got ${JSON.stringify(result)})`);
  return result;
}

function refused(entry: string): string {
  const result = parseEgressHost(entry);
  assert.ok('error' in result, `${entry} is refused (got ${JSON.stringify(result)})`);
  return result.error;
}

describe('parseEgressHost', () => {
  it('parses a host name and its port', () => {
    assert.deepEqual(parsed('api.example.com:443'), { kind: 'name', name: 'api.example.com', port: 443 });
    assert.deepEqual(parsed('localhost:8080'), { kind: 'name', name: 'localhost', port: 8080 });
    assert.deepEqual(parsed('db-1.internal:5432'), { kind: 'name', name: 'db-1.internal', port: 5432 });
  });

  it('lower-cases names and IPv6 addresses', () => {
    assert.deepEqual(parsed('API.Example.COM:443'), { kind: 'name', name: 'api.example.com', port: 443 });
    assert.deepEqual(parsed('*.GitHubUserContent.com:443'), {
      kind: 'subdomains',
      suffix: 'githubusercontent.com',
      port: 443,
    });
    assert.deepEqual(parsed('[2001:DB8::1]:443'), { kind: 'ipv6', address: '2001:db8::1', port: 443 });
  });

  it('refuses names that are not host names', () => {
    for (const entry of [
      'exa mple.com:443',
      'under_score.com:443',
      '-leading.example.com:443',
      'trailing-.example.com:443',
      'double..dot.com:443',
      '.example.com:443',
      'example.com.:443',
      `${'a'.repeat(64)}.com:443`,
      `${Array.from({ length: 64 }, () => 'abc').join('.')}:443`, // 255 characters
      ':443',
      '*:443',
      'http://example.com:443',
    ]) {
      refused(entry);
    }
    assert.deepEqual(parsed(`${'a'.repeat(63)}.com:443`).kind, 'name');
  });

  it('a wildcard is "*." before a domain of at least two labels', () => {
    assert.deepEqual(parsed('*.example.com:443'), { kind: 'subdomains', suffix: 'example.com', port: 443 });
    assert.deepEqual(parsed('*.a.b.example.com:443'), { kind: 'subdomains', suffix: 'a.b.example.com', port: 443 });
    assert.match(refused('*.com:443'), /wildcard/);
    for (const entry of [
      '*.*.example.com:443',
      '*example.com:443',
      'a.*.example.com:443',
      '*.:443',
      '**.example.com:443',
    ]) {
      refused(entry);
    }
  });

  it('parses IPv4 addresses and checks their range', () => {
    assert.deepEqual(parsed('198.51.100.7:80'), { kind: 'ipv4', address: '198.51.100.7', port: 80 });
    assert.deepEqual(parsed('0.0.0.0:80'), { kind: 'ipv4', address: '0.0.0.0', port: 80 });
    assert.deepEqual(parsed('255.255.255.255:80'), { kind: 'ipv4', address: '255.255.255.255', port: 80 });
    for (const entry of [
      '256.1.1.1:80',
      '1.1.1.256:80',
      '01.2.3.4:80', // leading zero: octal to some resolvers
      '1.2.3.010:80',
      '00.0.0.0:80',
      '1.2.3:80',
      '1.2.3.4.5:80',
      '1..2.3:80',
      '1234.1.1.1:80',
      '2130706433:80', // 127.0.0.1 as one number
    ]) {
      assert.match(refused(entry), /not an IPv4 address/, entry);
    }
  });

  it('parses IPv6 addresses in brackets, :: among them', () => {
    assert.deepEqual(parsed('[::]:443'), { kind: 'ipv6', address: '::', port: 443 });
    assert.deepEqual(parsed('[::1]:443'), { kind: 'ipv6', address: '::1', port: 443 });
    assert.deepEqual(parsed('[2001:db8::]:443'), { kind: 'ipv6', address: '2001:db8::', port: 443 });
    assert.deepEqual(parsed('[2001:db8:0:0:0:0:0:1]:443'), {
      kind: 'ipv6',
      address: '2001:db8:0:0:0:0:0:1',
      port: 443,
    });
    for (const entry of [
      '[1::2::3]:443',
      '[2001:db8:0:0:0:0:0:0:1]:443', // nine groups
      '[2001:db8:0:0:0:0:1]:443', // seven groups, no ::
      '[1:2:3:4:5:6:7::8]:443', // :: standing for no group
      '[12345::1]:443',
      '[g::1]:443',
      '[:1::]:443',
      '[]:443',
      '[1.2.3.4]:443',
    ]) {
      assert.match(refused(entry), /not an IPv6 address/, entry);
    }
    refused('2001:db8::1:443'); // without brackets: not a host name
  });

  it('needs a port between 1 and 65535', () => {
    assert.match(refused('example.com:0'), /port 0/);
    assert.match(refused('example.com:65536'), /port 65536/);
    assert.match(refused('example.com'), /host:port/);
    assert.match(refused('example.com:'), /host:port/);
    assert.match(refused('example.com:443x'), /host:port/);
    assert.match(refused('example.com:-1'), /host:port/);
    assert.match(refused('example.com:123456'), /host:port/);
    assert.match(refused('[::1]'), /host:port/);
    assert.match(refused('1.2.3.4'), /host:port/);
    assert.equal(parsed('example.com:1').port, 1);
    assert.equal(parsed('example.com:65535').port, 65535);
  });
});

describe('parseEgressHosts', () => {
  it('parses every entry in order', () => {
    assert.deepEqual(
      parseEgressHosts(['b.example.com:443', '10.1.2.3:5432']).map((h) => h.kind),
      ['name', 'ipv4'],
    );
  });
  it('throws on a bad entry, with its error', () => {
    assert.throws(() => parseEgressHosts(['ok.example.com:443', 'example.com:0']), /port 0/);
  });
});

describe('matchesEgressHost', () => {
  it('a name matches exactly that name (any case) on that port', () => {
    const entry = parsed('api.example.com:443');
    assert.equal(matchesEgressHost(entry, 'api.example.com', 443), true);
    assert.equal(matchesEgressHost(entry, 'API.EXAMPLE.com', 443), true);
    assert.equal(matchesEgressHost(entry, 'api.example.com', 80), false);
    assert.equal(matchesEgressHost(entry, 'x.api.example.com', 443), false);
    assert.equal(matchesEgressHost(entry, 'example.com', 443), false);
    assert.equal(matchesEgressHost(entry, 'api.example.com.evil.test', 443), false);
    assert.equal(matchesEgressHost(entry, 'evilapi.example.com', 443), false);
  });

  it('a wildcard matches subdomains at any depth, never the apex', () => {
    const entry = parsed('*.example.com:443');
    assert.equal(matchesEgressHost(entry, 'a.example.com', 443), true);
    assert.equal(matchesEgressHost(entry, 'a.b.example.com', 443), true);
    assert.equal(matchesEgressHost(entry, 'A.Example.Com', 443), true);
    assert.equal(matchesEgressHost(entry, 'example.com', 443), false);
    assert.equal(matchesEgressHost(entry, 'evilexample.com', 443), false);
    assert.equal(matchesEgressHost(entry, 'a.example.com.evil.test', 443), false);
    assert.equal(matchesEgressHost(entry, 'a.example.com', 8443), false);
  });

  it('an address entry matches only that address', () => {
    const v4 = parsed('198.51.100.7:80');
    assert.equal(matchesEgressHost(v4, '198.51.100.7', 80), true);
    assert.equal(matchesEgressHost(v4, '198.51.100.7', 443), false);
    assert.equal(matchesEgressHost(v4, '198.51.100.70', 80), false);
    assert.equal(matchesEgressHost(v4, '98.51.100.7', 80), false);
    assert.equal(matchesEgressHost(v4, 'host.example.com', 80), false);
    const v6 = parsed('[2001:db8::1]:443');
    assert.equal(matchesEgressHost(v6, '2001:db8::1', 443), true);
    assert.equal(matchesEgressHost(v6, '[2001:db8::1]', 443), true);
    assert.equal(matchesEgressHost(v6, '2001:DB8::1', 443), true);
    assert.equal(matchesEgressHost(v6, '2001:db8::2', 443), false);
    assert.equal(matchesEgressHost(v6, '2001:db8::1', 80), false);
  });

  it('a name entry never matches an address', () => {
    for (const entry of ['localhost:80', 'example.com:80', '*.example.com:80']) {
      for (const address of ['127.0.0.1', '198.51.100.7', '::1', '[::1]', '2001:db8::1']) {
        assert.equal(matchesEgressHost(parsed(entry), address, 80), false, `${entry} vs ${address}`);
      }
    }
  });

  it('a wildcard of numeric labels never matches an address', () => {
    const result = parseEgressHost('*.2.3.4:80');
    if ('error' in result) return; // refusing the entry is a fix too
    assert.equal(matchesEgressHost(result, '1.2.3.4', 80), false);
  });
});

describe('formatEgressHost', () => {
  it('writes back what it parsed, in one form', () => {
    for (const entry of [
      'api.example.com:443',
      '*.example.com:443',
      'localhost:1',
      '198.51.100.7:80',
      '0.0.0.0:65535',
      '[::]:443',
      '[2001:db8::1]:443',
      '[fe80:0:0:0:0:0:0:1]:8080',
    ]) {
      assert.equal(formatEgressHost(parsed(entry)), entry);
      const again = formatEgressHost(parsed(formatEgressHost(parsed(entry))));
      assert.equal(again, entry);
    }
  });

  it('lower-cases on the way back', () => {
    assert.equal(formatEgressHost(parsed('API.Example.COM:443')), 'api.example.com:443');
    assert.equal(formatEgressHost(parsed('*.Example.COM:443')), '*.example.com:443');
    assert.equal(formatEgressHost(parsed('[2001:DB8::A]:443')), '[2001:db8::a]:443');
  });
});
