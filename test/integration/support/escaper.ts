import { buildFixture, CANARY_IMAGE, ensureTestImages } from './docker.js';

/** The fixture that attacks hintbox and the host (test/fixtures/escaper), under a tag of its own. */
export const ESCAPER_IMAGE = 'hintbox-test/escaper:latest';

let built: Promise<void> | undefined;
/** Builds the escaper image once per process (on hintbox's Node base). */
export function ensureEscaperImage(): Promise<void> {
  built ??= (async () => {
    await ensureTestImages();
    await buildFixture('escaper', ESCAPER_IMAGE, { NODE_SERVER_IMAGE: CANARY_IMAGE });
  })();
  return built;
}
