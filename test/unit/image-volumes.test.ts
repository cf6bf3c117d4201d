import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { assertNoVolumes, imageVolumePaths, volumeMasks } from '../../src/engine/image-volumes.js';

const OPTIONS = 'rw,nosuid,nodev,noexec,size=1024';
const masks = (imageVolumes: string[], binds: string[] = ['/projects', '/run/hintbox/io']) =>
  volumeMasks({ imageVolumes, binds, tmpfs: ['/tmp', '/home/sandbox'], options: OPTIONS, what: 'sandbox ro-offline' });

describe('volumeMasks', () => {
  it("gives each of the image's VOLUME paths a bounded tmpfs, inherited and nested ones alike", () => {
    assert.deepEqual(imageVolumePaths({ '/data': {}, '/var/cache/app/': {} }), ['/data', '/var/cache/app/']);
    assert.deepEqual(imageVolumePaths(null), []);
    assert.deepEqual(masks(['/data', '/var/cache/app/', '/tmp/x', '/home/sandbox/.cache']), {
      '/data': OPTIONS,
      '/var/cache/app': OPTIONS,
      '/tmp/x': OPTIONS,
      '/home/sandbox/.cache': OPTIONS,
    });
  });

  it('leaves a path a mount already covers (Docker makes no volume there) and masks nothing when the image has none', () => {
    assert.deepEqual(masks(['/projects', '/projects/', '/tmp', '/run/hintbox/io']), {});
    assert.deepEqual(masks([]), {});
  });

  // proves: IMAGE-VOLUMES
  it('refuses a VOLUME inside a bind mount (its mask would make a mount point in the host folder) and one that is no folder', () => {
    assert.throws(
      () => masks(['/projects/cache']),
      /^Error: sandbox ro-offline: the image declares VOLUME \/projects\/cache inside the mount at \/projects: /,
    );
    assert.throws(() => masks(['/run/hintbox/io/x']), /inside the mount at \/run\/hintbox\/io/);
    assert.throws(() => masks(['/']), /which is not a folder hintbox can mask/);
    assert.throws(() => masks(['data']), /which is not a folder hintbox can mask/);
  });
});

describe('assertNoVolumes', () => {
  // proves: IMAGE-VOLUMES
  it('refuses a container the engine gave a volume, whatever else it has', () => {
    assert.doesNotThrow(() =>
      assertNoVolumes(
        [
          { Type: 'bind', Destination: '/projects' },
          { Type: 'tmpfs', Destination: '/data' },
        ],
        'x',
      ),
    );
    assert.doesNotThrow(() => assertNoVolumes(undefined, 'x'));
    assert.throws(
      () => assertNoVolumes([{ Type: 'volume', Name: 'abc', Destination: '/data' }], 'sandbox ro-offline'),
      /^Error: sandbox ro-offline: the engine gave it a volume at \/data: refused/,
    );
  });
});
