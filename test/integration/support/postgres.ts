import path from 'node:path';
import { GenericContainer, Wait, type StartedTestContainer } from 'testcontainers';
import { IMAGES_DIR } from '../../../src/engine/docker/image-builder.js';
import { docker } from './docker.js';
import { onTestEngine } from './engine-images.js';

export const POSTGRES_IMAGE = 'hintbox-test/postgres:15';
export const POSTGRES_ADMIN_PASSWORD = 'hintbox-test-admin';

export interface StartedPostgres extends AsyncDisposable {
  container: StartedTestContainer;
  /** Admin (superuser) URL reachable from the host. */
  adminUrl: string;
  host: string;
  port: number;
  stop(): Promise<void>;
}

/**
 * A real PostgreSQL 15 (Debian's package on the seeded Debian base), started by testcontainers
 * from an image built from images/postgres. Never a host service.
 */
export async function startPostgres(
  /** `hostPort`: a fixed port on the host, kept when the container is stopped and started again (else a free one). */
  options: { hostPort?: number } = {},
): Promise<StartedPostgres> {
  // Debian bookworm's Postgres 15: the release the database tests were written against.
  await onTestEngine(await docker(), [POSTGRES_IMAGE], (builder) =>
    builder.buildOn('bookworm', POSTGRES_IMAGE, path.join(IMAGES_DIR, 'postgres')),
  );
  const container = await new GenericContainer(POSTGRES_IMAGE)
    .withExposedPorts(options.hostPort ? { container: 5432, host: options.hostPort } : 5432)
    .withLabels({ 'hintbox-test': 'postgres' })
    .withWaitStrategy(Wait.forLogMessage(/database system is ready to accept connections/))
    .start();
  const host = container.getHost();
  const port = container.getMappedPort(5432);
  const adminUrl = `postgres://postgres:${POSTGRES_ADMIN_PASSWORD}@${host}:${port}/postgres`;
  const stop = async () => {
    await container.stop();
  };
  return { container, adminUrl, host, port, stop, [Symbol.asyncDispose]: stop };
}
