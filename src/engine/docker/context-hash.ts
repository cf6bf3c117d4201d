import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

/** SHA-256 over a build context's files (not node_modules) and build args: the staleness key. */
export function contextHash(dir: string, buildargs: Record<string, string>): string {
  const hash = createHash('sha256');
  hash.update(JSON.stringify(Object.entries(buildargs).sort()));
  const walk = (rel: string): void => {
    for (const name of readdirSync(path.join(dir, rel)).sort()) {
      if (name === 'node_modules') continue;
      const relPath = path.join(rel, name);
      const stat = statSync(path.join(dir, relPath));
      if (stat.isDirectory()) walk(relPath);
      else if (stat.isFile())
        hash
          .update(`${relPath}\0`)
          .update(readFileSync(path.join(dir, relPath)))
          .update('\0');
    }
  };
  walk('.');
  return hash.digest('hex');
}
