import { compileArgumentRule, matchesArgumentRule } from './argument-rule.js';

/**
 * A person's standing answer for one tool ("allow always for this tool, and these argument
 * patterns"), as the lock file keeps it, and whether it answers one call. Pure.
 *
 * It is bound to the definition the person approved (`sha256`): a tool whose definition is
 * now another one is `voided`, whatever changed. Arguments are matched as a pre-approval's
 * (argument-rule.ts): every listed argument must be present and match, a regular expression
 * never matches a value with a `..` path segment, `{ under }` only a path inside the folder.
 */
export interface StandingAnswer {
  /** The SHA-256 of the approved definition it was given for. */
  sha256: string;
  /** Per argument: a regular expression (whole value) or `{ under: folder }`; none: every call. */
  arguments: Readonly<Record<string, string | { under: string }>>;
  /** Who gave it (the operating-system user that ran `hintbox approve --always`). */
  by: string;
  /** When (ISO 8601). */
  at: string;
}

/**
 * What a standing answer says of one call:
 * - `applies`: the call runs without a question;
 * - `voided`: the answer was given for another definition (the person is asked; audited once);
 * - `outside`: the arguments are outside its patterns (the person is asked).
 */
export type StandingVerdict = 'applies' | 'voided' | 'outside';

/** The verdict of `answer` on a call of the definition `pinHash` with `args`. */
export function standingVerdict(
  answer: StandingAnswer,
  pinHash: string,
  args: Record<string, unknown> | undefined,
): StandingVerdict {
  if (answer.sha256 !== pinHash) return 'voided';
  for (const [name, source] of Object.entries(answer.arguments)) {
    if (!matchesArgumentRule(compileArgumentRule(source), args?.[name])) return 'outside';
  }
  return 'applies';
}

/** The patterns of a standing answer, one line each, for `hintbox approve` and the form. */
export function describeStanding(answer: StandingAnswer): string {
  const patterns = Object.entries(answer.arguments).map(([name, source]) =>
    typeof source === 'string' ? `${name} matches /${source}/` : `${name} under ${source.under}`,
  );
  const scope = patterns.length === 0 ? 'every call' : `calls where ${patterns.join(' and ')}`;
  return `${scope} (given by ${answer.by} at ${answer.at}, for definition ${answer.sha256.slice(0, 12)})`;
}
