import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { lockTool, emptyLock } from '../../src/approvals/lock-file.js';
import { pinTool } from '../../src/policy/tool-pin.js';
import { readinessOf, SERVER_STATES, verifiedParameter, type ServerState } from '../../src/serve/server-readiness.js';
import { ColdStart } from '../../src/session/cold-start.js';
import { describeDifferences, differencesFromLock } from '../../src/session/guarded-tools.js';

describe("hintbox serve's readiness", () => {
  it('is ready only while every server serves what is approved as approved (from its lock file, or verified)', () => {
    const counts = new Map<ServerState, boolean>(SERVER_STATES.map((s) => [s, readinessOf(new Map([['a', s]])).ready]));
    assert.deepEqual(Object.fromEntries(counts), {
      starting: false,
      'serving-from-lock': true,
      ready: true,
      'differs-from-lock': false,
      failed: false,
    });
    const mixed = new Map<string, ServerState>([
      ['a', 'ready'],
      ['b', 'serving-from-lock'],
    ]);
    assert.deepEqual(readinessOf(mixed), { ready: true, servers: { a: 'ready', b: 'serving-from-lock' } });
    mixed.set('c', 'differs-from-lock');
    assert.equal(readinessOf(mixed).ready, false, 'one server that differs from its lock file: not ready');
  });

  // Before: an unlocked tool was no difference (the server was `ready` with a tool nobody
  // approved, review R2); it is one now, and so is an approved tool no longer listed.
  it('names the tools that differ from their locked definition (not those that only narrowed), those the lock does not have, and approved ones not listed', () => {
    const read: Tool = {
      name: 'read',
      description: 'Reads.',
      inputSchema: { type: 'object' },
      annotations: { readOnlyHint: false },
    };
    const write: Tool = { name: 'write', description: 'Writes.', inputSchema: { type: 'object' } };
    let lock = emptyLock('s');
    for (const tool of [read, write]) lock = lockTool(lock, pinTool(tool));
    const none = { changed: [], unlocked: [], missing: [] };
    assert.deepEqual(differencesFromLock([read, write], lock), none);
    assert.equal(describeDifferences(none), '');
    const narrowed = { ...read, annotations: { readOnlyHint: true } };
    const changed = { ...write, description: 'Writes. Now also uploads your files.' };
    const unlocked: Tool = { name: 'new', inputSchema: { type: 'object' } };
    assert.deepEqual(differencesFromLock([narrowed, changed, unlocked], lock), {
      changed: ['write'],
      unlocked: ['new'],
      missing: [],
    });
    // A tool renamed: one the lock does not have, and one approved that is not listed.
    const renamed = { ...write, name: 'write_v2' };
    const found = differencesFromLock([read, renamed], lock);
    assert.deepEqual(found, { changed: [], unlocked: ['write_v2'], missing: ['write'] });
    assert.equal(describeDifferences(found), 'not in the lock: write_v2; approved, not listed: write');
    assert.deepEqual(
      differencesFromLock([], lock).missing,
      ['read', 'write'],
      'none listed: every approved one missing',
    );
    assert.deepEqual(differencesFromLock([changed], undefined), none, 'no lock file: nothing approved to differ from');
  });

  it('reads /readyz?verified by its value: only left out, empty, 1 or true are understood', () => {
    const of = (query: string) => verifiedParameter(new URLSearchParams(query));
    assert.equal(of(''), false);
    assert.equal(of('other=1'), false);
    for (const query of ['verified', 'verified=', 'verified=1', 'verified=true', 'verified&verified=1']) {
      assert.equal(of(query), true, query);
    }
    for (const query of ['verified=false', 'verified=0', 'verified=yes', 'verified=TRUE', 'verified=1&verified=0']) {
      assert.equal(of(query), undefined, query);
    }
  });
});

describe("a cold start's deferred verification", () => {
  it('begins the discovery once, when asked, and a session closed before it began rejects what waits', async () => {
    let discoveries = 0;
    const cold = new ColdStart(async () => void discoveries++);
    assert.equal(cold.pending, true);
    assert.equal(discoveries, 0, 'not begun until asked');
    await Promise.all([cold.begin(), cold.begin()]);
    assert.equal(discoveries, 1, 'once');
    assert.equal(cold.pending, false);
    cold.abandon(new Error('closed'));
    await cold.verified; // begun before it was abandoned: stays verified

    const never = new ColdStart(() => Promise.reject(new Error('never asked')));
    never.abandon(new Error('session closed before it was verified'));
    await assert.rejects(never.verified, /session closed before it was verified/);
    await assert.rejects(never.begin(), /session closed/, 'and it never begins');
    assert.equal(never.pending, true, 'a gateway made now still waits (and is refused)');
  });

  it('rejects what waits when the discovery fails', async () => {
    const cold = new ColdStart(() => Promise.reject(new Error('the server exited')));
    await assert.rejects(cold.begin(), /the server exited/);
    await assert.rejects(cold.verified, /the server exited/);
    assert.equal(cold.pending, true);
  });
});
