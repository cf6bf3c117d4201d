import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { parseEgressHosts } from '../../src/policy/egress-hosts.js';
import { egressViolation } from '../../src/policy/egress-violation.js';
import { parseSquidLogLine } from '../../src/engine/squid-config.js';

const BACKEND = parseEgressHosts(['db.internal:5432', '*.api.internal:443', '10.0.0.5:6379', '[fd00::5]:6380']);
const CLOSED = new Set(['query', 'lookup']);
const closedWorld = (tool: string): boolean => CLOSED.has(tool);

function violation(
  host: string,
  port: number,
  tools: readonly string[],
  { allowed = true, backend = BACKEND } = {},
): string | undefined {
  return egressViolation({ request: { host, port, allowed }, tools, closedWorld, backend });
}

describe('egressViolation', () => {
  it('a closed-world tool in flight reaching outside the backend is an openWorldHint violation', () => {
    const text = violation('example.com', 443, ['query']);
    assert.ok(text !== undefined, 'a violation');
    assert.ok(text.startsWith('openWorldHint:'), text);
    assert.match(text, /example\.com:443/);
    assert.ok(violation('example.com', 443, ['query', 'lookup'])?.startsWith('openWorldHint:'));
  });

  it('an unreadable proxy log line under a closed-world call is a violation; an IPv6 backend as Squid logs it is not', () => {
    const unreadable = parseSquidLogLine('hintbox-egress 1764633600.250 12 TCP_MISS 200 GET')!;
    assert.ok(violation(unreadable.host, unreadable.port, ['query'], { allowed: unreadable.allowed }));
    const v6 = parseSquidLogLine('hintbox-egress 1764633600.250 3 TCP_MISS 200 GET %5Bfd00::5%5D 6380')!;
    assert.equal(violation(v6.host, v6.port, ['query']), undefined);
  });

  it('the backend on another port, or the apex of a backend wildcard, is outside the backend', () => {
    assert.ok(violation('db.internal', 5433, ['query']));
    assert.ok(violation('api.internal', 443, ['query']));
    assert.ok(violation('10.0.0.6', 6379, ['query']));
  });

  it('inside the backend: no violation', () => {
    assert.equal(violation('db.internal', 5432, ['query']), undefined);
    assert.equal(violation('DB.Internal', 5432, ['query']), undefined);
    assert.equal(violation('eu.api.internal', 443, ['query', 'lookup']), undefined);
    assert.equal(violation('10.0.0.5', 6379, ['query']), undefined);
    assert.equal(violation('fd00::5', 6380, ['query']), undefined);
  });

  it('no violation when any tool that could have made it is open-world', () => {
    assert.equal(violation('example.com', 443, ['fetch']), undefined);
    assert.equal(violation('example.com', 443, ['query', 'fetch']), undefined);
    assert.equal(violation('example.com', 443, ['fetch', 'query', 'lookup']), undefined);
  });

  it('no tools: no violation (nothing to blame)', () => {
    assert.equal(violation('example.com', 443, []), undefined);
  });

  it('an empty backend: every request of a closed-world tool is a violation', () => {
    assert.ok(violation('db.internal', 5432, ['query'], { backend: [] }));
  });

  it('says whether the proxy allowed or refused the request', () => {
    const allowed = violation('example.com', 443, ['query'], { allowed: true });
    const refused = violation('example.com', 443, ['query'], { allowed: false });
    assert.match(allowed ?? '', /allowed by network\.allow/);
    assert.doesNotMatch(allowed ?? '', /refused/);
    assert.match(refused ?? '', /\(refused\)/);
    assert.doesNotMatch(refused ?? '', /allowed by/);
  });

  it('names an IPv6 destination in brackets', () => {
    assert.match(violation('2001:db8::1', 443, ['query']) ?? '', /\[2001:db8::1\]:443/);
    assert.match(violation('198.51.100.7', 80, ['query']) ?? '', /198\.51\.100\.7:80/);
  });
});
