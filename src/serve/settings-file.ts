import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import type { z } from 'zod';
import { HintboxError } from '../util/hintbox-error.js';
import { operatorFileLinkProblems } from '../profile/operator-file-links.js';

/**
 * serve's own settings files (the tokens file, the OAuth settings): YAML or JSON, read and
 * checked once, every problem one line `file: field: message`, bad usage (exit 2).
 */

/** Throws the problems of a settings file, one line each (exit 2). */
export function settingsProblems(file: string, lines: readonly string[]): never {
  throw new HintboxError(lines.map((line) => `${file}: ${line}`).join('\n'), { exitCode: 2 });
}

/**
 * A settings file's text; `what` names it in the error ("the tokens file"). One with a second
 * name (a hard link) is refused as the profile is: a sandbox could write it by that name.
 */
export function readSettingsFile(file: string, what: string): string {
  const linked = operatorFileLinkProblems([{ path: file, what }]);
  if (linked.length > 0) throw new HintboxError(linked.map((line) => `${file}: ${line}`).join('\n'), { exitCode: 2 });
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    throw new HintboxError(`${file}: cannot read ${what}: ${(error as NodeJS.ErrnoException).code ?? ''}`, {
      exitCode: 2,
    });
  }
}

/** Parses a settings file's text (YAML or JSON) against its schema. */
export function parseSettings<S extends z.ZodType>(text: string, file: string, schema: S): z.output<S> {
  let raw: unknown;
  try {
    raw = parse(text);
  } catch (error) {
    return settingsProblems(file, [`invalid YAML or JSON: ${(error as Error).message.split('\n')[0] ?? ''}`]);
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    return settingsProblems(
      file,
      parsed.error.issues.map((i) => `${i.path.join('.') || '(top)'}: ${i.message}`),
    );
  }
  return parsed.data;
}
