import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import type { ToolClaim } from '../policy/plan-sandboxes.js';

/**
 * The tools (names and annotations) that a server's image listed at its last start, so that the
 * next start of the same image can start the sandboxes they plan in parallel with discovery
 * instead of after it. Kept per server and image id (a content hash: a changed image is a
 * miss). Only a hint for speed: discovery still decides, sandboxes it does not plan are
 * removed, and whatever the file says the planner keeps every grant within the profile's
 * ceiling.
 */
export interface KnownTools {
  read(server: string, imageId: string): Promise<ToolClaim[] | undefined>;
  write(server: string, imageId: string, tools: readonly ToolClaim[]): Promise<void>;
}

const Entry = z.object({
  imageId: z.string(),
  tools: z.array(z.object({ name: z.string(), annotations: z.unknown().optional() })),
});

/** Known tools as one JSON file per server in `dir` (the state folder's `known-tools/`). */
export function knownToolsIn(dir: string): KnownTools {
  const file = (server: string): string => path.join(dir, `${encodeURIComponent(server)}.json`);
  return {
    async read(server, imageId) {
      let text: string;
      try {
        text = await readFile(file(server), 'utf8');
      } catch {
        return undefined;
      }
      const parsed = Entry.safeParse(safeJson(text));
      if (!parsed.success || parsed.data.imageId !== imageId) return undefined;
      return parsed.data.tools.map((t) => ({ name: t.name, annotations: t.annotations }));
    },
    async write(server, imageId, tools) {
      await mkdir(dir, { recursive: true, mode: 0o700 });
      const entry = { imageId, tools: tools.map((t) => ({ name: t.name, annotations: t.annotations })) };
      // Written aside and renamed: a reader never sees half a file.
      const temporary = `${file(server)}.${process.pid}.tmp`;
      await writeFile(temporary, JSON.stringify(entry), { mode: 0o600 });
      await rename(temporary, file(server));
    },
  };
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
