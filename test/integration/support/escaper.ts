import path from 'node:path';
import { GenericContainer } from 'testcontainers';
import { CANARY_IMAGE, FIXTURES, ensureTestImages } from './docker.js';

/** The fixture that attacks hintbox and the host (test/fixtures/escaper), under a tag of its own. */
export const ESCAPER_IMAGE = 'hintbox-test/escaper:latest';

let built: Promise<void> | undefined;
/** Builds the escaper image once per process (on hintbox's Node base). */
export function ensureEscaperImage(): Promise<void> {
  built ??= (async () => {
    await ensureTestImages();
    await GenericContainer.fromDockerfile(path.join(FIXTURES, 'escaper'))
      .withBuildArgs({ NODE_SERVER_IMAGE: CANARY_IMAGE })
      .build(ESCAPER_IMAGE, { deleteOnExit: false });
  })();
  return built;
}
