import type { KeyObject } from 'node:crypto';
import { existsSync } from 'node:fs';
import { auditKeyId, openAuditKey, publicKeyPem, readPublicKey } from '../audit/audit-key.js';
import { verifyAuditLog } from '../audit/audit-reader.js';
import type { CheckpointAnchor } from '../audit/checkpoint-check.js';
import { anchoredCheckpoints, auditFolderId } from '../audit/checkpoint-shipper.js';
import { hintboxEnvironment } from '../config/environment.js';
import { UsageError } from '../util/hintbox-error.js';
import { redactUrl } from '../util/redact-url.js';
import { cliLog } from './common.js';
import { LineOutput } from './line-output.js';

/**
 * `hintbox audit verify [--public-key FILE]…` and `hintbox audit key --public`: the log's hash
 * chains checked, and each chain held against its signed checkpoints, with the public keys
 * given, else with hintbox's own key (the state folder's, or HINTBOX_AUDIT_KEY); with `--sink`,
 * against the checkpoints the Postgres sink holds of the folder first.
 */

/** Where `--sink` reads the folder's anchored checkpoints: the database, and the folder's name there. */
export interface VerifySink {
  url: string;
  /** Default: this host and the folder's real path ({@link auditFolderId}). */
  folder?: string;
}

/** `--sink` and `--sink-folder` read: the sink to verify against, or none. Usage errors for a half-given one. */
export function verifySink(values: Record<string, unknown>): VerifySink | undefined {
  const folder = values['sink-folder'] as string | undefined;
  if (values.sink !== true) {
    if (folder !== undefined) throw new UsageError('audit verify: --sink-folder goes with --sink');
    return undefined;
  }
  const url = hintboxEnvironment().databaseUrl;
  if (!url) throw new UsageError('audit verify --sink: set HINTBOX_DATABASE_URL to the Postgres the log is shipped to');
  if (folder === '') throw new UsageError('audit verify: --sink-folder must name a folder (HOST:/PATH)');
  return { url, ...(folder === undefined ? {} : { folder }) };
}

/** The checkpoints the sink holds of `dir`, as an anchor; says on stdout how many, of which folder. */
async function sinkAnchor(dir: string, sink: VerifySink, out: LineOutput): Promise<CheckpointAnchor> {
  const folder = sink.folder ?? auditFolderId(dir);
  let lines;
  try {
    lines = await anchoredCheckpoints(sink.url, folder);
  } catch (error) {
    throw new Error(`audit verify --sink: ${redactUrl(sink.url)}: ${(error as Error).message}`);
  }
  await out.write(`the sink holds ${lines.length} checkpoint(s) of this folder (${folder}) at ${redactUrl(sink.url)}`);
  return { place: 'the sink (hintbox.audit_checkpoints)', lines };
}

/** The public keys to check checkpoints with: the files given, else hintbox's own key's. */
function verifyingKeys(files: string[]): KeyObject[] {
  if (files.length) return files.map(readPublicKey);
  const { auditKeyFile, auditDir } = hintboxEnvironment();
  return [openAuditKey(auditKeyFile, { auditDir, create: false }).publicKey];
}

/** `hintbox audit key --public`: prints the public key (made at first use, as a run would). */
export function printPublicKey(values: Record<string, unknown>): number {
  if (values.public !== true) throw new UsageError('audit key: say --public (the private key is never printed)');
  const { auditKeyFile, auditDir } = hintboxEnvironment();
  const key = openAuditKey(auditKeyFile, { auditDir, create: true });
  process.stdout.write(publicKeyPem(key));
  cliLog.info(`key ${key.id} (${auditKeyFile})`);
  return 0;
}

export async function verifyAuditFolder(
  dir: string,
  publicKeyFiles: string[],
  named = true,
  sink?: VerifySink,
): Promise<number> {
  const out = new LineOutput();
  const anchor = sink && (await sinkAnchor(dir, sink, out));
  // A folder the operator named that is not there is a mistyped (or removed) one: it fails. The
  // default folder is made at the first recorded call: before that, there is nothing to verify
  // (unless the sink holds checkpoints of it: then it was deleted).
  if (anchor?.lines.length && !existsSync(dir)) {
    await out.end();
    cliLog.error(
      `audit log ${dir} does not exist, but the sink holds ${anchor.lines.length} checkpoint(s) of it: deleted`,
    );
    return 1;
  }
  if (!existsSync(dir)) {
    await out.end();
    if (named) {
      cliLog.error(`audit log ${dir} does not exist: nothing to verify (HINTBOX_AUDIT_DIR?)`);
      return 1;
    }
    process.stdout.write(`audit log ${dir}: nothing recorded yet (no call has been recorded here)\n`);
    return 0;
  }
  const publicKeys = verifyingKeys(publicKeyFiles);
  const chains = await verifyAuditLog(dir, { publicKeys, ...(anchor ? { anchor } : {}) });
  let broken = 0;
  let lines = 0;
  let torn = 0;
  let uncovered = 0;
  const place = (p: { file: string; line: number }): string => `${p.file}${p.line ? `:${p.line}` : ''}`;
  for (const chain of chains) {
    lines += chain.lines;
    torn += chain.torn.length;
    for (const b of chain.breaks) await out.write(`${place(b)}: ${b.message}`);
    for (const t of chain.torn) await out.write(`${place(t)}: torn, not a break: ${t.message}`);
    if (chain.uncovered) {
      uncovered += chain.uncovered.records;
      await out.write(
        `${place(chain.uncovered)}: ${chain.uncovered.records} record(s) from here on are after the chain's last checkpoint: NOT YET COVERED (a crash window, or its process runs), not proven`,
      );
    }
    if (chain.breaks.length) broken++;
    await out.write(
      `chain ${chain.chain}: ${chain.lines} line(s) in ${chain.files} file(s), ${chain.breaks.length ? `BROKEN (${chain.breaks.length})` : 'ok'}, ` +
        `${chain.torn.length ? `${chain.torn.length} torn, ` : ''}` +
        `${chain.closed ? 'closed' : 'not closed (its process runs, or was killed)'}, head ${chain.head ?? '-'}`,
    );
  }
  const tornNote = torn ? ` (${torn} torn by a crash or a failed write, see above)` : '';
  const uncoveredNote = uncovered ? `; ${uncovered} record(s) after the last checkpoints not yet covered` : '';
  const keys = publicKeys.map(auditKeyId).join(', ');
  await out.write(
    broken
      ? `audit log ${dir}: ${broken} of ${chains.length} chain(s) broken`
      : chains.length
        ? `audit log ${dir}: ${chains.length} chain(s), ${lines} line(s), every chain holds and matches its checkpoints${anchor ? " (the sink's, then the file's)" : ''} signed by ${keys}${tornNote}${uncoveredNote}`
        : `audit log ${dir}: no chain yet (no record was written here)`,
  );
  await out.end();
  return broken ? 1 : 0;
}
