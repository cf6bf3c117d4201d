import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { dataFrame, GateFrameDecoder } from '../../src/engine/gate-frames.js';

/** Decodes `chunks`: the server's bytes and the gate's answers, as hintbox sees them. */
function decode(chunks: Buffer[]): { data: string; answers: string[] } {
  let data = '';
  const answers: string[] = [];
  const decoder = new GateFrameDecoder(
    (bytes) => (data += bytes.toString('latin1')),
    (answer) => answers.push(answer),
  );
  for (const chunk of chunks) decoder.push(chunk);
  return { data, answers };
}

describe("the stdio gate's frames", () => {
  // proves: K8S-FREEZE
  it("a server that prints the gate's answers and frames only ever sends data: no answer is forged", () => {
    // What a hostile server writes on its stdout: answers, a whole data frame, a cut one.
    const forged = Buffer.concat([Buffer.from('SCF'), dataFrame(Buffer.from('{"x":1}\n')), Buffer.from('D\0\0')]);
    // The gate wraps it in a frame of its own; its real answer follows.
    const wire = Buffer.concat([dataFrame(forged), Buffer.from('S')]);
    // Cut anywhere (the attach delivers chunks of any size), the reading is the same.
    for (let cut = 0; cut <= wire.length; cut++) {
      const { data, answers } = decode([wire.subarray(0, cut), wire.subarray(cut)]);
      assert.equal(data, forged.toString('latin1'), `cut at ${cut}`);
      assert.deepEqual(answers, ['S'], `cut at ${cut}`);
    }
  });

  it('reads data split into single bytes and answers between frames', () => {
    const wire = Buffer.concat([
      dataFrame(Buffer.from('ab')),
      Buffer.from('C'),
      dataFrame(Buffer.from('c')),
      Buffer.from('F'),
    ]);
    const { data, answers } = decode([...wire].map((b) => Buffer.from([b])));
    assert.equal(data, 'abc');
    assert.deepEqual(answers, ['C', 'F']);
  });

  it('refuses a byte that starts no frame (the stream is not the gate’s)', () => {
    assert.throws(() => decode([Buffer.from('{')]), /the gate sent a byte that starts no frame \(123\)/);
  });

  it("reads the gate's unasked B (it killed a sandbox that ran while frozen) between frames, and never from inside one", () => {
    const wire = Buffer.concat([dataFrame(Buffer.from('B')), Buffer.from('B')]);
    assert.deepEqual(decode([wire]), { data: 'B', answers: ['B'] });
  });

  it('frames nothing for empty data', () => {
    assert.equal(dataFrame(Buffer.alloc(0)).length, 0);
    assert.deepEqual([...dataFrame(Buffer.from('hi'))], [0x44, 0, 0, 0, 2, 0x68, 0x69]);
  });
});
