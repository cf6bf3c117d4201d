import {
  emptyLock,
  instructionsHash,
  lockFilePath,
  lockTool,
  readLockFile,
  serializeLockFile,
  writeLockFile,
  type LockFile,
} from '../approvals/lock-file.js';
import { diffPins, formatPinChanges, pinTool } from '../policy/tool-pin.js';
import { HintboxSession } from '../session/hintbox-session.js';
import { visibleText } from '../util/visible-text.js';
import { cliLog, dockerReady, profileArg } from './common.js';
import type { CommandSpec } from './main.js';
import { UsageError } from './usage-error.js';

const HELP = `Usage: hintbox approve <profile> (<tool>... | --all)

Starts the server once in the strictest sandbox to list its tools, shows for each named tool
what differs from its approved definition in the lock file (or the whole definition when it
was never approved), and writes the current definitions to the lock file beside the profile
(<profile>.lock.json: per tool its whole definition and SHA-256, and the server's
instructions), atomically. Review and commit it like any lock file. "hintbox run" reads it
and never writes it; it serves and routes approved tools, and plans changed annotations again.

Options:
  --all       approve every tool the server lists now (tools it no longer lists leave the
              lock), and its instructions
  -h, --help  this help`;

export const approveCommand: CommandSpec = {
  help: HELP,
  options: { all: { type: 'boolean' } },
  async run({ positionals, values }) {
    const [file, ...names] = positionals;
    const profile = profileArg('approve', file === undefined ? [] : [file]);
    if (!values.all && names.length === 0) throw new UsageError('approve: name the tools to approve, or --all');
    const lockFile = lockFilePath(profile.file);
    const before = readLockFile(lockFile, profile.name);
    const docker = await dockerReady();
    await using session = await HintboxSession.open({ profile, docker, log: cliLog, startAll: false });
    const listed = new Map(session.tools.map((t) => [t.name, t]));
    const unknown = names.filter((n) => !listed.has(n));
    if (unknown.length)
      throw new UsageError(
        `approve: ${profile.name} lists no tool ${unknown.join(', ')} (it lists ${[...listed.keys()].join(', ')})`,
      );
    const out = (line: string): void => void process.stdout.write(visibleText(line) + '\n');
    let lock: LockFile = before ?? emptyLock(profile.name);
    if (values.all) {
      for (const gone of Object.keys(lock.tools).filter((n) => !listed.has(n))) {
        out(`${gone}: no longer listed by the server: removed from the lock`);
        const tools = { ...lock.tools };
        delete tools[gone];
        lock = { ...lock, tools };
      }
    }
    for (const name of values.all ? [...listed.keys()] : names) {
      const pin = pinTool(listed.get(name)!);
      const approved = lock.tools[name];
      if (approved?.sha256 === pin.hash) {
        out(`${name}: already approved (${pin.hash.slice(0, 12)})`);
        continue;
      }
      out(approved ? `${name}: changed since it was approved:` : `${name}: never approved; its definition:`);
      const lines = approved
        ? formatPinChanges(diffPins(approved.definition, pin.definition))
        : JSON.stringify(pin.definition, null, 2).split('\n');
      for (const line of lines) out(`  ${line}`);
      lock = lockTool(lock, pin);
      out(`${name}: approved (${pin.hash.slice(0, 12)})`);
    }
    if (values.all) {
      const text = session.instructions ?? null;
      const hash = instructionsHash(text);
      if (hash === lock.instructions.sha256) out(`instructions: already approved${text === null ? ' (none)' : ''}`);
      else {
        out(`instructions: ${lock.instructions.text === null ? 'never approved' : 'changed since approved'}; now:`);
        for (const line of (text ?? '(none)').split('\n')) out(`  │ ${line}`);
        if (lock.instructions.text !== null) {
          out('  before:');
          for (const line of lock.instructions.text.split('\n')) out(`  │ ${line}`);
        }
        lock = { ...lock, instructions: { text, sha256: hash } };
      }
    }
    if (before && serializeLockFile(before) === serializeLockFile(lock)) {
      cliLog.info(`${lockFile} unchanged`);
      return 0;
    }
    writeLockFile(lockFile, lock);
    cliLog.info(`approvals written to ${lockFile}: review and commit it`);
    return 0;
  },
};
