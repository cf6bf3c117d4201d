import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LABEL_OWNER_HOST, LABEL_OWNER_PID, LABEL_SESSION } from '../../src/engine/docker/container-spec.js';
import { NO_ICC_OPTION, sessionNetworkOptions } from '../../src/engine/docker/session-network.js';

describe('sessionNetworkOptions', () => {
  it("is a bridge of the session's own, without traffic between its containers, labelled for cleanup", () => {
    const options = sessionNetworkOptions({ sessionId: 'sess42', ownerHost: 'host-a', ownerPid: 4242 }, 'fetch');
    assert.equal(options.Name, 'hintbox-sess42-open');
    assert.equal(options.Driver, 'bridge');
    assert.deepEqual(options.Options, { [NO_ICC_OPTION]: 'false' });
    assert.equal(options.Labels?.[LABEL_SESSION], 'sess42');
    assert.equal(options.Labels?.[LABEL_OWNER_HOST], 'host-a');
    assert.equal(options.Labels?.[LABEL_OWNER_PID], '4242');
  });
});
