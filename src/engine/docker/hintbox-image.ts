import { cpSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { packagePath } from '../../util/package-root.js';
import { VERSION } from '../../version.js';
import { ImageError, IMAGES_DIR, type ImageBuilder } from './image-builder.js';

/**
 * hintbox's own image (images/hintbox/Dockerfile): the bundle (and its chunks), the sandbox gate, the
 * build folders of the server bases (so `hintbox images build` works inside it) and the shipped
 * profiles, on Debian trixie (Node.js 20; bookworm's is 18, below hintbox's engines). The build
 * folder is assembled from the installed package, so the same code builds it from a checkout
 * (after `npm run build`) and from inside the image itself.
 */

/** The image's name: `hintbox/hintbox:<version>`. */
export const HINTBOX_IMAGE = `hintbox/hintbox:${VERSION}`;

/**
 * What the image holds of the package, relative to its root; the bundle and gate first. The
 * bundled dependencies' licence texts are in the chunks' `.LEGAL.txt` files (dist/chunks).
 */
const PACKAGE_FILES = [
  'dist/hintbox.mjs',
  'dist/chunks',
  'dist/hintbox-gate',
  'package.json',
  'images',
  'profiles',
] as const;

/** Builds (or keeps, while nothing of it changed) hintbox's image; returns its name. */
export async function buildHintboxImage(builder: ImageBuilder, packageRoot = packagePath()): Promise<string> {
  const missing = PACKAGE_FILES.filter((file) => !existsSync(path.join(packageRoot, file)));
  if (missing.length) {
    throw new ImageError(
      `building ${HINTBOX_IMAGE} needs ${missing.join(', ')} in ${packageRoot}: build hintbox first (npm run build)`,
    );
  }
  const context = mkdtempSync(path.join(os.tmpdir(), 'hintbox-image-'));
  try {
    cpSync(path.join(IMAGES_DIR, 'hintbox', 'Dockerfile'), path.join(context, 'Dockerfile'));
    for (const file of PACKAGE_FILES) {
      cpSync(path.join(packageRoot, file), path.join(context, 'hintbox', file), {
        recursive: true,
        filter: (src) => path.basename(src) !== 'node_modules',
      });
    }
    await builder.buildOn('trixie', HINTBOX_IMAGE, context);
    return HINTBOX_IMAGE;
  } finally {
    rmSync(context, { recursive: true, force: true });
  }
}
