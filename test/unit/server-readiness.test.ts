import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { lockTool, emptyLock } from '../../src/approvals/lock-file.js';
import { pinTool } from '../../src/policy/tool-pin.js';
import { readinessOf, SERVER_STATES, type ServerState } from '../../src/serve/server-readiness.js';
import { ColdStart } from '../../src/session/cold-start.js';
import { changedSinceApproved } from '../../src/session/guarded-tools.js';

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

  it('names the tools that differ from their locked definition, not those that only narrowed or are not locked', () => {
    const read: Tool = {
      name: 'read',
      description: 'Reads.',
      inputSchema: { type: 'object' },
      annotations: { readOnlyHint: false },
    };
    const write: Tool = { name: 'write', description: 'Writes.', inputSchema: { type: 'object' } };
    let lock = emptyLock('s');
    for (const tool of [read, write]) lock = lockTool(lock, pinTool(tool));
    assert.deepEqual(changedSinceApproved([read, write], lock), []);
    const narrowed = { ...read, annotations: { readOnlyHint: true } };
    const changed = { ...write, description: 'Writes. Now also uploads your files.' };
    const unlocked: Tool = { name: 'new', inputSchema: { type: 'object' } };
    assert.deepEqual(changedSinceApproved([narrowed, changed, unlocked], lock), ['write']);
    assert.deepEqual(changedSinceApproved([changed], undefined), [], 'no lock file: nothing approved to differ from');
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
