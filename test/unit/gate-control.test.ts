import assert from 'node:assert/strict';
import { Duplex } from 'node:stream';
import { describe, it } from 'node:test';
import { GateControl } from '../../src/engine/gate-control.js';

/** The gate's end in-process: what hintbox wrote, and a way to answer. */
function fakeGate(): { socket: Duplex; written: string[]; answer(bytes: string): void } {
  const written: string[] = [];
  const socket = new Duplex({
    read() {},
    write(chunk: Buffer, _encoding, done) {
      written.push(chunk.toString('latin1'));
      done();
    },
  });
  return { socket, written, answer: (bytes) => socket.push(Buffer.from(bytes, 'latin1')) };
}

describe('GateControl', () => {
  it('sends S and C and resolves on the same byte back, in order', async () => {
    const gate = fakeGate();
    const control = new GateControl(gate.socket);
    const frozen = control.freeze();
    const thawed = control.thaw();
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(gate.written, ['S', 'C']);
    gate.answer('SC');
    await frozen;
    await thawed;
  });

  it('rejects a freeze the gate could not make (F), naming what failed', async () => {
    const gate = fakeGate();
    const control = new GateControl(gate.socket);
    const frozen = control.freeze();
    gate.answer('F');
    await assert.rejects(frozen, /could not stop every process of the sandbox \(it answered "F"\)/);
  });

  it('fails every command, waiting and later, when the gate is silent past the timeout or its connection ends', async () => {
    const gate = fakeGate();
    const control = new GateControl(gate.socket, 50);
    await assert.rejects(control.freeze(), /did not answer S in 50 ms/);
    // An answer that comes late is not taken for the next command's.
    gate.answer('S');
    await assert.rejects(control.thaw(), /did not answer S in 50 ms/);

    const other = fakeGate();
    const second = new GateControl(other.socket);
    const waiting = second.freeze();
    other.socket.destroy();
    await assert.rejects(waiting, /closed its control connection/);
    await assert.rejects(second.thaw(), /closed its control connection/);
  });

  it('treats an answer nobody asked for as a broken gate', async () => {
    const gate = fakeGate();
    const control = new GateControl(gate.socket);
    gate.answer('C');
    await new Promise((r) => setImmediate(r));
    await assert.rejects(control.freeze(), /sent "C" unasked/);
  });

  // proves: HELD-WOKEN
  it('takes B (the gate killed a sandbox that ran while frozen) as the end: every command fails, the listener hears it once', async () => {
    const gate = fakeGate();
    const control = new GateControl(gate.socket);
    const heard: string[] = [];
    control.onWoken((error) => heard.push(error.message));
    const thawing = control.thaw(); // a command waiting does not take B for its answer
    gate.answer('BB');
    await assert.rejects(thawing, /ran while frozen: woken by a signal not from hintbox; its sandbox was killed/);
    await assert.rejects(control.freeze(), /ran while frozen/);
    assert.deepEqual(heard, ['ran while frozen: woken by a signal not from hintbox; its sandbox was killed']);
  });
});
