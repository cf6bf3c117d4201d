import { userInfo } from 'node:os';
import {
  lockFilePath,
  lockedTool,
  readLockFile,
  standingAnswerOf,
  updateLockFile,
  withStandingAnswer,
  type LockFile,
} from '../approvals/lock-file.js';
import { describeStanding, type StandingAnswer } from '../policy/standing-answer.js';
import type { Profile } from '../profile/load-profile.js';
import { systemClock, type Clock } from '../util/clock.js';
import { UsageError } from '../util/hintbox-error.js';
import { renderServerText } from '../util/render-server-text.js';
import { isoTime } from '../util/iso-time.js';

/**
 * `hintbox approve --always` and `--revoke`: a person's standing answer for one tool, written to
 * the lock file beside the profile (and so reviewed in git like the approvals), or taken back.
 * Only from the command line: what reaches hintbox through the client (a form's answer) may be
 * given by a client that accepts forms on its own or by the model driving it, so a standing
 * answer is never created from there (docs/approvals.md). No server is started: the answer is
 * bound to the definition approved in the lock file, which must be there already.
 */

/** The options of approve that give or take back standing answers. */
export interface StandingRequest {
  always?: string | undefined;
  revoke: readonly string[];
  /** `name=REGEX`: the argument's whole value must match. */
  arg: readonly string[];
  /** `name=/folder`: the argument must be a path inside the folder. */
  under: readonly string[];
}

/** Parses `--arg` and `--under` into a standing answer's patterns; a usage error names a bad one. Pure. */
export function standingPatterns(request: StandingRequest): Record<string, string | { under: string }> {
  const patterns: Record<string, string | { under: string }> = {};
  const split = (flag: string, text: string): [string, string] => {
    const at = text.indexOf('=');
    if (at <= 0) throw new UsageError(`approve: --${flag} ${JSON.stringify(text)}: expected <argument>=<pattern>`);
    const name = text.slice(0, at);
    if (Object.hasOwn(patterns, name)) throw new UsageError(`approve: argument ${name} has two patterns`);
    return [name, text.slice(at + 1)];
  };
  for (const text of request.arg) {
    const [name, source] = split('arg', text);
    try {
      new RegExp(source, 'u');
    } catch (error) {
      throw new UsageError(`approve: --arg ${name}: not a regular expression: ${(error as Error).message}`);
    }
    Object.defineProperty(patterns, name, { value: source, enumerable: true });
  }
  for (const text of request.under) {
    const [name, folder] = split('under', text);
    if (!folder.startsWith('/') || folder.includes('\0')) {
      throw new UsageError(`approve: --under ${name}: expected an absolute folder as the server sees it`);
    }
    Object.defineProperty(patterns, name, { value: { under: folder }, enumerable: true });
  }
  return patterns;
}

/** Whether approve was asked for standing answers (and nothing else may be asked with them). */
export function wantsStanding(request: StandingRequest): boolean {
  return request.always !== undefined || request.revoke.length > 0;
}

/** Gives or revokes standing answers in the lock file; prints what it did. Returns the exit code. */
export async function runStanding(
  profile: Profile,
  request: StandingRequest,
  out: (line: string) => void,
  clock: Clock = systemClock,
): Promise<number> {
  if (request.always === undefined && request.arg.length + request.under.length > 0) {
    throw new UsageError('approve: --arg and --under go with --always <tool>');
  }
  const file = lockFilePath(profile.file);
  const patterns = standingPatterns(request);
  const edits: ((lock: LockFile) => LockFile)[] = [];
  const lock = readLockFile(file, profile.name);
  for (const tool of request.revoke) {
    if (!lock || !standingAnswerOf(lock, tool)) {
      throw new UsageError(`approve: --revoke ${renderServerText(tool)}: it has no standing answer`);
    }
    edits.push((l) => withStandingAnswer(l, tool, undefined));
    out(`${renderServerText(tool)}: standing answer revoked: every call is asked again`);
  }
  if (request.always !== undefined) {
    const tool = request.always;
    const approved = lock ? lockedTool(lock, tool) : undefined;
    if (!approved) {
      throw new UsageError(
        `approve: --always ${renderServerText(tool)}: the tool is not approved in ${file}: approve it first (hintbox approve ${profile.file} ${renderServerText(tool)})`,
      );
    }
    const answer: StandingAnswer = {
      sha256: approved.sha256,
      arguments: patterns,
      by: userInfo().username,
      at: isoTime(clock.now()),
    };
    edits.push((l) => {
      // Bound to the definition approved when the answer is written: another approve meanwhile voids it.
      const now = lockedTool(l, tool);
      if (now?.sha256 !== approved.sha256)
        throw new UsageError(`approve: ${tool} was approved again meanwhile: run it again`);
      return withStandingAnswer(l, tool, answer);
    });
    out(renderServerText(`${tool}: standing answer given: ${describeStanding(answer)}`));
  }
  const { written } = await updateLockFile(file, profile.name, (l) => edits.reduce((acc, edit) => edit(acc), l));
  out(written ? `standing answers written to ${file}: review and commit it` : `${file} unchanged`);
  return 0;
}

/** The standing answers of a lock, one line each, for `hintbox approve` to show. */
export function standingLines(lock: LockFile | undefined): string[] {
  if (!lock) return [];
  return Object.entries(lock.standing).map(([tool, answer]) => {
    const approved = lockedTool(lock, tool);
    const state = approved?.sha256 === answer.sha256 ? '' : ' — VOID: given for another definition';
    return renderServerText(`${tool}: standing answer: ${describeStanding(answer)}${state}`);
  });
}
