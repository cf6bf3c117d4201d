import {
  emptyLock,
  instructionsHash,
  keepPromptsOrResources,
  lockedPromptOrResource,
  lockPromptOrResource,
  lockFilePath,
  lockedTool,
  lockTool,
  readLockFile,
  serializeLockFile,
  standingAnswerOf,
  updateLockFile,
  withStandingAnswer,
  PROMPT_RESOURCE_SECTION,
  type LockFile,
} from '../approvals/lock-file.js';
import {
  PROMPT_RESOURCE_KINDS,
  KIND_LABEL,
  promptOrResourceChanges,
  keyOf,
  pinPromptOrResource,
  type PromptOrResourceKind,
} from '../policy/prompt-resource-pin.js';
import { diffPins, formatPinChanges, pinTool } from '../policy/tool-pin.js';
import type { PromptsAndResources } from '../catalog/discover-prompts-and-resources.js';
import { HintboxSession } from '../session/hintbox-session.js';
import { renderServerLines, renderServerText } from '../util/render-server-text.js';
import { cliLog, engineReady, profileForListing } from './common.js';
import { approvalSummary } from './approval-summary.js';
import { runStanding, standingLines, wantsStanding, type StandingRequest } from './approve-standing.js';
import type { CommandSpec } from './command-spec.js';
import { UsageError } from '../util/hintbox-error.js';
import { askYesOrNo, consentOf } from './yes-or-no.js';

const HELP = `Usage: hintbox approve <profile> (<tool>... | --prompt <name> | --resource <uri> | --instructions | --all) [--yes]
       hintbox approve <profile> --always <tool> [--arg NAME=REGEX]... [--under NAME=/FOLDER]...
       hintbox approve <profile> --revoke <tool>

Starts the server once in the strictest sandbox to list its tools, shows for each named tool
what it claims (hintbox's defaults for the hints it did not send marked as such), where it will
run and what its sandbox does not enforce, then what differs from its approved definition in
the lock file (or the whole definition when it was never approved). Then it asks y/N on the
terminal (--yes: without asking; without a terminal and without --yes it refuses before
starting anything), and on yes writes the current definitions to the lock file beside the
profile (<profile>.lock.json: per tool its whole definition and SHA-256, and the server's
instructions), atomically. Review and commit it like any lock file. "hintbox run" reads it
and never writes it; it serves and routes approved tools, and plans changed annotations again.

The server's instructions (the text its initialize answer gives the client for its model) are
approved the same way: shown, locked, and passed on by "hintbox run" only while unchanged. So
are its prompts, resources and resource templates (their definitions as listed: a prompt's
changed text is a changed prompt; what a resource holds, and the messages a prompt returns,
are data and are not locked).
Server text is shown with control characters, line separators and bidi overrides escaped.

What it reads: the profile, its lock file, the image (built if missing) and the variables the
profile names. It needs nothing only a run needs: the listing sandbox mounts everything
read-only, so a workspace the sandbox user cannot write is only warned about, and an env entry
whose variable is unset (a token) is left out (named on stderr) and the server is listed
without it.

Options:
  --instructions  approve the server's instructions
  --prompt NAME   approve a prompt (repeatable)
  --resource URI  approve a resource, or a resource template by its URI template (repeatable)
  --yes           approve what it shows without asking (scripts, CI: no terminal needed)
  --all           approve every tool, prompt, resource and template the server lists now
                  (what it no longer lists leaves the lock), and its instructions
  --always TOOL   your standing answer "allow always" for an approved tool: its calls run
                  without asking you while its definition is the one approved (a change voids
                  it), each audited as decided by this answer; kept in the lock file
  --arg N=REGEX   with --always: only calls whose argument N matches REGEX (the whole value)
  --under N=DIR   with --always: only calls whose argument N is a path inside DIR
  --revoke TOOL   take a standing answer back: every call of the tool is asked again
  -h, --help      this help`;

export const approveCommand: CommandSpec = {
  help: HELP,
  options: {
    all: { type: 'boolean' },
    yes: { type: 'boolean' },
    instructions: { type: 'boolean' },
    prompt: { type: 'string', multiple: true },
    resource: { type: 'string', multiple: true },
    always: { type: 'string' },
    revoke: { type: 'string', multiple: true },
    arg: { type: 'string', multiple: true },
    under: { type: 'string', multiple: true },
  },
  async run({ positionals, values }) {
    const [file, ...names] = positionals;
    const profile = profileForListing('approve', file === undefined ? [] : [file]);
    const prompts = (values.prompt ?? []) as string[];
    const resources = (values.resource ?? []) as string[];
    const standing: StandingRequest = {
      always: values.always as string | undefined,
      revoke: (values.revoke ?? []) as string[],
      arg: (values.arg ?? []) as string[],
      under: (values.under ?? []) as string[],
    };
    const out = (line: string): void => void process.stdout.write(line + '\n');
    if (wantsStanding(standing) || standing.arg.length + standing.under.length > 0) {
      if (values.all || values.instructions || names.length + prompts.length + resources.length > 0) {
        throw new UsageError(
          'approve: --always and --revoke go alone (approve the definitions first, then give the answer)',
        );
      }
      return runStanding(profile, standing, out);
    }
    if (!values.all && !values.instructions && names.length === 0 && prompts.length + resources.length === 0) {
      throw new UsageError('approve: name the tools to approve, or --prompt, --resource, --instructions, or --all');
    }
    // Before anything starts: a script that did not say yes gets one line and nothing else.
    const consent = consentOf('approve', values.yes === true, process.stdin.isTTY === true);
    const lockFile = lockFilePath(profile.file);
    const before = readLockFile(lockFile, profile.name);
    const engine = await engineReady();
    await using session = await HintboxSession.open({ profile, engine, log: cliLog, startAll: false });
    const listed = new Map(session.tools.map((t) => [t.name, t]));
    const unknown = names.filter((n) => !listed.has(n));
    if (unknown.length)
      throw new UsageError(
        `approve: ${profile.name} lists no tool ${unknown.map(renderServerText).join(', ')} (it lists ${[...listed.keys()].join(', ')})`,
      );
    // What is shown is against the lock as read before listing; what is written is these
    // changes applied to the lock as it is when written (another approve may have run meanwhile).
    const changes: ((lock: LockFile) => LockFile)[] = [];
    /** What the person is asked about: each change shown, not those that keep what is approved. */
    let shown = 0;
    const change = (edit: (lock: LockFile) => LockFile): void => {
      changes.push(edit);
      shown += 1;
      lock = edit(lock);
    };
    // Said as done only once it is (with --yes at once; else after the person's yes).
    const approvedWord = consent === 'given' ? 'approved' : 'to approve';
    let lock: LockFile = before ?? emptyLock(profile.name);
    if (values.all) {
      for (const gone of Object.keys(lock.tools).filter((n) => !listed.has(n))) {
        out(`${renderServerText(gone)}: no longer listed by the server: removed from the lock`);
      }
      change((l) => ({ ...l, tools: Object.fromEntries(Object.entries(l.tools).filter(([n]) => listed.has(n))) }));
    }
    // Tools only: what it claims, where it runs, what is not enforced (prompts and resources have no plan).
    const summary = (label: string): string[] => (listed.has(label) ? approvalSummary(session.plan, label) : []);
    /** One definition: shown against its approved one (or whole, when never approved), and locked. */
    const approveOne = (
      label: string,
      pin: { hash: string; definition: unknown },
      approved: { sha256: string } | undefined,
      changedLines: () => string[],
      edit: (l: LockFile) => LockFile,
    ): void => {
      if (approved?.sha256 === pin.hash) {
        out(`${label}: already approved (${pin.hash.slice(0, 12)})`);
        changes.push(edit); // kept so, whatever another approve wrote meanwhile
        return;
      }
      out(approved ? `${label}: changed since it was approved:` : `${label}: never approved; its definition:`);
      for (const line of summary(label)) out(`  ${line}`);
      // JSON escapes C0 controls; the rest (C1, U+2028, bidi, …) is rendered.
      const lines = approved
        ? changedLines().map(renderServerText)
        : renderServerLines(JSON.stringify(pin.definition, null, 2));
      for (const line of lines) out(`  ${line}`);
      change(edit);
      out(`${label}: ${approvedWord} (${pin.hash.slice(0, 12)})`);
    };
    for (const name of values.all ? [...listed.keys()] : names) {
      const pin = pinTool(listed.get(name)!);
      const approved = lockedTool(lock, name);
      const diff = () => (approved ? formatPinChanges(diffPins(approved.definition, pin.definition)) : []);
      approveOne(name, pin, approved, diff, (l) => lockTool(l, pin));
      const given = standingAnswerOf(lock, name);
      if (given && given.sha256 !== pin.hash) {
        // It was given for the definition approved before: a new one is a new question.
        out(`${renderServerText(name)}: its standing answer was given for the definition before: voided (removed)`);
        change((l) => withStandingAnswer(l, name, undefined));
      }
    }
    const offered = itemsByKey(session.promptsAndResources.listed);
    const wanted: [PromptOrResourceKind, string][] = [
      ...prompts.map((name): [PromptOrResourceKind, string] => ['prompt', name]),
      ...resources.map((uri): [PromptOrResourceKind, string] =>
        offered.resourceTemplate.has(uri) && !offered.resource.has(uri) ? ['resourceTemplate', uri] : ['resource', uri],
      ),
    ];
    const missing = wanted.filter(([kind, key]) => !offered[kind].has(key));
    if (missing.length) {
      throw new UsageError(
        `approve: ${profile.name} lists no ${missing.map(([kind, key]) => `${KIND_LABEL[kind]} ${renderServerText(key)}`).join(', ')}`,
      );
    }
    for (const kind of PROMPT_RESOURCE_KINDS) {
      if (values.all) {
        for (const gone of Object.keys(lockSection(lock, kind)).filter((k) => !offered[kind].has(k))) {
          out(`${KIND_LABEL[kind]} ${renderServerText(gone)}: no longer listed by the server: removed from the lock`);
        }
        change((l) => keepPromptsOrResources(l, kind, (key) => offered[kind].has(key)));
      }
      const keys = values.all ? [...offered[kind].keys()] : wanted.filter(([k]) => k === kind).map(([, key]) => key);
      for (const key of keys) {
        const pin = pinPromptOrResource(offered[kind].get(key)!);
        const label = `${KIND_LABEL[kind]} ${renderServerText(key)}`;
        const approved = lockedPromptOrResource(lock, kind, key);
        const diff = () => (approved ? promptOrResourceChanges(approved.definition, pin.definition) : []);
        approveOne(label, pin, approved, diff, (l) => lockPromptOrResource(l, kind, pin));
      }
    }
    const text = session.instructions ?? null;
    const hash = instructionsHash(text);
    if (values.all || values.instructions) {
      if (text === null && lock.instructions.text === null) out('instructions: the server sends none');
      else if (hash === lock.instructions.sha256) out(`instructions: already approved (${hash?.slice(0, 12)})`);
      else {
        if (lock.instructions.text === null) {
          out('instructions: never approved; their text:');
          for (const line of instructionLines(text)) out(`  ${line}`);
        } else {
          out('instructions: changed since it was approved:');
          for (const line of [
            'before:',
            ...instructionLines(lock.instructions.text),
            'now:',
            ...instructionLines(text),
          ])
            out(`  ${line}`);
        }
        change((l) => ({ ...l, instructions: { text, sha256: hash } }));
        out(`instructions: ${approvedWord}${hash ? ` (${hash.slice(0, 12)})` : ' (none)'}`);
      }
    } else if (text !== null && hash !== lock.instructions.sha256) {
      out(
        `instructions: ${lock.instructions.sha256 ? 'changed since approved' : 'not approved'}; withheld from clients until "hintbox approve ${profile.file} --instructions"`,
      );
    }
    for (const line of standingLines(lock)) out(line);
    if (consent === 'ask' && shown > 0) {
      // The discovery sandbox is not kept while the person reads.
      await session.dispose();
      if (!(await askYesOrNo(`Approve the ${shown} change(s) above into ${lockFile}? [y/N] `))) {
        out(`nothing approved: ${lockFile} unchanged`);
        return 1;
      }
    }
    const { current, written } = await updateLockFile(lockFile, profile.name, (l) =>
      changes.reduce((acc, edit) => edit(acc), l),
    );
    if (current && (!before || serializeLockFile(current) !== serializeLockFile(before))) {
      cliLog.info(`${lockFile} changed while the server was listed (another approve?): those approvals are kept`);
    }
    cliLog.info(written ? `approvals written to ${lockFile}: review and commit it` : `${lockFile} unchanged`);
    return 0;
  },
};

/** Instructions as fenced, rendered lines (they are the server's text, not hintbox's). */
function instructionLines(text: string | null): string[] {
  if (text === null) return ['(none)'];
  return renderServerLines(text).map((line) => `│ ${line}`);
}

/** The server's prompts, resources and templates, of each kind by their key. */
function itemsByKey(listed: PromptsAndResources): Record<PromptOrResourceKind, Map<string, object>> {
  const byKey = (kind: PromptOrResourceKind, list: readonly object[]): Map<string, object> =>
    new Map(list.map((item) => [keyOf(kind, item), item]));
  return {
    prompt: byKey('prompt', listed.prompts),
    resource: byKey('resource', listed.resources),
    resourceTemplate: byKey('resourceTemplate', listed.resourceTemplates),
  };
}

function lockSection(lock: LockFile, kind: PromptOrResourceKind): Record<string, unknown> {
  return lock[PROMPT_RESOURCE_SECTION[kind]];
}
