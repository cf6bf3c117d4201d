import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RequestStates } from '../../src/confirmation/request-state.js';
import { ParkedCalls, ServerInputRounds, type ParkedCall } from '../../src/gateway/server-input-rounds.js';
import { roundTripOf, MODERN_PROTOCOL_VERSION, META_KEY } from '../../src/protocol/protocol-era.js';

const ALICE = '["alice",null]';
const MALLORY = '["mallory",null]';
const call = (n: number, caller = ALICE): ParkedCall => ({ caller, tool: 'ask', arguments: { q: 1 }, call: n });
const QUESTION = { message: 'Pick a colour.', requestedSchema: { type: 'object', properties: {} } };

/** Rounds under a clock the test moves. */
function roundsAt(): { rounds: ServerInputRounds; clock: { now: number } } {
  const clock = { now: 1_000_000 };
  return { rounds: new ServerInputRounds('asker', new RequestStates({ now: () => clock.now })), clock };
}

/** The retry a 2026 client sends: its envelope, the echoed state, the answer under `key`. */
function retryOf(state: unknown, key: string, answer: unknown = { action: 'accept', content: { colour: 'red' } }) {
  const roundTrip = roundTripOf({
    _meta: { [META_KEY.protocolVersion]: MODERN_PROTOCOL_VERSION },
    requestState: state,
    inputResponses: { [key]: answer },
  });
  assert.ok(roundTrip);
  return roundTrip;
}

/** Asks `parked` a question: the state, the key, and whether (and with what) the server was answered. */
function ask(rounds: ServerInputRounds, parked: ParkedCall, signal = new AbortController().signal, ttlMs = 60_000) {
  const { inputRequired, answer } = rounds.ask(parked, 'elicitation/create', QUESTION, ttlMs, signal);
  const heard: { answer?: Record<string, unknown>; error?: string } = {};
  answer.then(
    (a) => (heard.answer = a),
    (e: Error) => (heard.error = e.message),
  );
  const key = Object.keys(inputRequired.inputRequests as object)[0] ?? '';
  return { state: inputRequired.requestState, key, heard };
}

describe('ServerInputRounds', () => {
  // proves: MRTR-SERVER-INPUT-BOUND
  it("uses up a withdrawn question's state: a server that asks and withdraws cannot fill its caller's outstanding states (attack)", async () => {
    // Before: each withdrawn question's state stayed outstanding for its whole life, counting
    // against the caller's cap that hintbox's own confirmations share.
    const states = new RequestStates({ now: () => 1_000_000, maxPerCaller: 3 });
    const rounds = new ServerInputRounds('asker', states);
    for (let n = 1; n <= 10; n++) {
      const withdrawn = new AbortController();
      ask(rounds, call(n), withdrawn.signal);
      withdrawn.abort(new Error('the server cancelled its question'));
      await Promise.resolve();
    }
    assert.equal(states.size, 0, 'no state of a withdrawn question is outstanding');
    assert.ok(
      'state' in states.tryMint({ caller: ALICE, server: 'asker', tool: 't', pinHash: 'p', arguments: {} }, 60_000),
    );
  });

  // proves: MRTR-SERVER-INPUT-BOUND
  it("refuses another caller's answer to a question, with the victim's own state, and the server hears nothing (attack)", async () => {
    const { rounds } = roundsAt();
    const victim = ask(rounds, call(1));
    const stolen = rounds.retry(retryOf(victim.state, victim.key), MALLORY, 'ask', { q: 1 });
    assert.deepEqual(stolen, {
      answered: false,
      method: 'elicitation/create',
      why: 'its requestState was issued for another call (different caller)',
    });
    await Promise.resolve();
    assert.deepEqual(victim.heard, {}, 'nothing answered to the server');
    // The victim's own retry still answers it (a mismatch does not use the state up).
    assert.equal(rounds.retry(retryOf(victim.state, victim.key), ALICE, 'ask', { q: 1 }).answered, true);
    await Promise.resolve();
    assert.deepEqual(victim.heard.answer, { action: 'accept', content: { colour: 'red' } });
  });

  // proves: MRTR-SERVER-INPUT-BOUND
  it('refuses other arguments, a forged, replayed or expired state, and a question withdrawn with its call', async () => {
    const { rounds, clock } = roundsAt();
    const outcome = (asked: { state: unknown; key: string }, state = asked.state, args: object = { q: 1 }) => {
      const o = rounds.retry(retryOf(state, asked.key), ALICE, 'ask', args as Record<string, unknown>);
      return o.answered ? 'answered' : o.why;
    };
    const asked = ask(rounds, call(2));
    assert.match(outcome(asked, asked.state, { q: 2 }), /another call \(different arguments\)/);
    assert.match(outcome(asked, `${String(asked.state)}x`), /does not verify/);
    assert.equal(outcome(asked), 'answered');
    assert.match(outcome(asked), /no question of the server waits/, 'a replay');

    const late = ask(rounds, call(3));
    clock.now += 61_000;
    assert.match(outcome(late), /expired/);
    assert.deepEqual(late.heard, {}, 'an expired answer reaches nobody');

    const controller = new AbortController();
    const withdrawn = ask(rounds, call(4), controller.signal);
    controller.abort(new Error('its tool call ended'));
    await Promise.resolve();
    assert.equal(withdrawn.heard.error, 'its tool call ended');
    assert.match(outcome(withdrawn), /no question of the server waits/);
  });

  it('claims only retries that answer a question of a server, never the confirmation of hintbox', () => {
    const { rounds } = roundsAt();
    assert.equal(rounds.claims(retryOf('s', 'hintbox.confirm')), false);
    assert.equal(rounds.claims(retryOf('s', 'hintbox.server-input.7')), true);
    assert.equal(rounds.claims(undefined), false);
  });

  // proves: MRTR-SERVER-INPUT-LIMITS
  it('withdraws a question nobody answers when its state expires: the server gets a timeout, the late answer nothing (attack)', async () => {
    // Before: the question had no time of its own; it waited (and held its call) until the call's ceiling.
    const states = new RequestStates();
    const parked = new ParkedCalls();
    const rounds = new ServerInputRounds('asker', states, parked);
    const asked = ask(rounds, call(1), new AbortController().signal, 100);
    assert.equal(parked.count(ALICE), 1);
    await new Promise((r) => setTimeout(r, 300));
    assert.match(
      asked.heard.error ?? 'still waiting',
      /^no answer to the question within 0\.1 s \(its requestState expired\): withdrawn$/,
    );
    const late = rounds.retry(retryOf(asked.state, asked.key), ALICE, 'ask', { q: 1 });
    assert.equal(late.answered, false);
    assert.equal(states.size, 0, 'its state is used up');
    assert.equal(parked.count(), 0, 'nothing is left parked');
  });

  it('counts the calls a caller has parked: answered, withdrawn or expired, each leaves; past the cap none is asked', async () => {
    const parked = new ParkedCalls(2);
    const rounds = new ServerInputRounds('asker', new RequestStates(), parked);
    const first = ask(rounds, call(1));
    const withdrawn = new AbortController();
    ask(rounds, call(2), withdrawn.signal);
    assert.throws(() => ask(rounds, call(3)), /^Error: this caller already has 2 calls waiting for the answers/);
    assert.equal(ask(rounds, call(4, MALLORY)).key.startsWith('hintbox.server-input.'), true, 'another caller');
    withdrawn.abort(new Error('its tool call ended'));
    assert.equal(rounds.retry(retryOf(first.state, first.key), ALICE, 'ask', { q: 1 }).answered, true);
    assert.equal(parked.count(ALICE), 0);
    assert.equal(parked.count(MALLORY), 1);
    assert.equal(rounds.refusal(ALICE), undefined);
  });
});
