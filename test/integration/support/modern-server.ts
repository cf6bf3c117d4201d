import { cpSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { NODE_SERVER_IMAGE } from '../../../src/engine/docker/image-builder.js';
import { scratchFolder } from '../../support/scratch-folder.js';
import { docker, ensureTestImages, FIXTURES, REPO } from './docker.js';
import { buildFromFolder, onTestEngine } from './engine-images.js';

/** The 2026-era fixture server (test/fixtures/modern: SDK 2.x's `@modelcontextprotocol/server`, 2026-07-28 only). */
export const MODERN_IMAGE = 'hintbox-test/modern:latest';

/** The Node packages the fixture imports, copied from the repository's node_modules (the versions package-lock.json pins). */
const PACKAGES = ['@modelcontextprotocol/server', '@modelcontextprotocol/core', 'zod'];

let built: Promise<void> | undefined;
/**
 * Builds the 2026-era fixture's image once per process: its folder and its packages in a
 * scratch context (the other fixtures need no packages, so their context is test/fixtures).
 */
export function ensureModernImage(): Promise<void> {
  built ??= (async () => {
    await ensureTestImages();
    const context = scratchFolder('hintbox-modern-image-');
    const app = path.join(context, 'modern');
    cpSync(path.join(FIXTURES, 'modern'), app, { recursive: true });
    for (const name of PACKAGES) {
      mkdirSync(path.dirname(path.join(app, 'node_modules', name)), { recursive: true });
      cpSync(path.join(REPO, 'node_modules', name), path.join(app, 'node_modules', name), { recursive: true });
    }
    await onTestEngine(await docker(), [MODERN_IMAGE], (_, store) =>
      buildFromFolder(store, context, 'modern/Dockerfile', MODERN_IMAGE, { NODE_SERVER_IMAGE }),
    );
  })();
  return built;
}
