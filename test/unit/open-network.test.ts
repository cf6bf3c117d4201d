import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LABEL_OWNER_HOST, LABEL_OWNER_PID, LABEL_SESSION } from '../../src/engine/sandbox-labels.js';
import { LABEL_OPEN_NETWORK, NO_ICC_OPTION, openNetworkOptions } from '../../src/engine/docker/open-network.js';

describe('openNetworkOptions', () => {
  // proves: SANDBOXES-APART
  it("is a bridge of the hintbox process's own, without traffic between its containers, labelled for cleanup", () => {
    const options = openNetworkOptions({ id: 'net42', ownerHost: 'host-a', ownerPid: 4242 });
    assert.equal(options.Name, 'hintbox-net42-open');
    assert.equal(options.Driver, 'bridge');
    assert.equal(options.Internal, false);
    assert.deepEqual(options.Options, { [NO_ICC_OPTION]: 'false' });
    assert.equal(options.Labels?.[LABEL_OPEN_NETWORK], 'net42');
    assert.equal(options.Labels?.[LABEL_OWNER_HOST], 'host-a');
    assert.equal(options.Labels?.[LABEL_OWNER_PID], '4242');
    // No session's: a session's teardown (which removes its session's networks) never takes it.
    assert.equal(options.Labels?.[LABEL_SESSION], undefined);
  });
});
