import { execFile, execFileSync } from 'node:child_process';
import { copyFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { scratchFolder } from '../../support/scratch-folder.js';

/**
 * Podman for the tests that run rendered Kubernetes Pods under `podman kube play`. Podman keeps
 * its own image store (/var/lib/containers): images are copied in from Docker's (`docker save |
 * podman load`), and nothing here touches Docker's containers, networks or volumes.
 */

const run = promisify(execFile);

/** Why the podman tests cannot run here (one line), or undefined when they can. */
export function podmanMissing(): string | undefined {
  try {
    execFileSync('podman', ['--version'], { stdio: 'ignore' });
    return undefined;
  } catch {
    return 'podman is not installed (.ci/run installs it): the podman kube play tests are skipped';
  }
}

export async function podman(...args: string[]): Promise<string> {
  const { stdout } = await run('podman', args, { maxBuffer: 16 * 1024 * 1024 });
  return stdout;
}

async function hasImage(name: string): Promise<boolean> {
  return run('podman', ['image', 'exists', name]).then(
    () => true,
    () => false,
  );
}

/** Copies a Docker image into Podman's store unless it is there already. */
export async function podmanImageFromDocker(name: string): Promise<void> {
  if (await hasImage(name)) return;
  await run('bash', ['-o', 'pipefail', '-c', `docker save ${name} | podman load -q`], { maxBuffer: 1024 * 1024 });
}

/**
 * An image holding the gate binary at `/usr/lib/hintbox/dist/hintbox-gate` (as hintbox's own
 * image does), on top of `base` (which has `cp` for the initContainer). Built in Podman's store.
 */
export async function podmanGateImage(gate: string, base: string): Promise<{ image: string; path: string }> {
  const image = 'localhost/hintbox-test/k8s-gate:latest';
  const dir = scratchFolder('hintbox-k8s-gate-');
  copyFileSync(gate, path.join(dir, 'hintbox-gate'));
  writeFileSync(
    path.join(dir, 'Containerfile'),
    `FROM ${base}\nCOPY hintbox-gate /usr/lib/hintbox/dist/hintbox-gate\n`,
  );
  await podman('build', '-q', '-t', image, dir);
  return { image, path: '/usr/lib/hintbox/dist/hintbox-gate' };
}
