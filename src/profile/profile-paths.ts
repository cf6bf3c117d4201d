import path from 'node:path';

/** `profiles/filesystem.yaml` → `profiles/filesystem.lock.json`. */
export function lockFilePath(profileFile: string): string {
  const dir = path.dirname(profileFile);
  const base = path.basename(profileFile).replace(/\.(ya?ml|json)$/i, '');
  return path.join(dir, `${base}.lock.json`);
}
