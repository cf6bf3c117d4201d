import { readFileSync } from 'node:fs';
import { packagePath } from './util/package-root.js';

/** hintbox's version, from its package.json. */
export const VERSION: string = (JSON.parse(readFileSync(packagePath('package.json'), 'utf8')) as { version: string })
  .version;
