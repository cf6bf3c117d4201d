import type Docker from 'dockerode';

/**
 * Force-removes a container with its anonymous volumes. Already gone (404) or being removed by
 * someone else (409) is no failure. Podman's compatible API sometimes answers a force-remove of
 * a container that is exiting with HTTP 500 "container state improper" (its kill found it
 * stopping): tried again until it is gone, for at most IMPROPER_STATE_WAIT_MS.
 */
export async function removeContainer(container: Docker.Container): Promise<void> {
  const deadline = Date.now() + IMPROPER_STATE_WAIT_MS;
  for (;;) {
    try {
      await container.remove({ force: true, v: true });
      return;
    } catch (error) {
      const { statusCode, message } = error as Error & { statusCode?: number };
      if (statusCode === 404 || statusCode === 409) return;
      if (statusCode !== 500 || !IMPROPER_STATE.test(message) || Date.now() > deadline) throw error;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** How long a removal is tried again while Podman finds the container in an improper state. */
const IMPROPER_STATE_WAIT_MS = 10_000;
const IMPROPER_STATE = /container state improper/;
