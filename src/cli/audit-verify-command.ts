import type { KeyObject } from 'node:crypto';
import { existsSync } from 'node:fs';
import { auditKeyId, openAuditKey, publicKeyPem, readPublicKey } from '../audit/audit-key.js';
import { verifyAuditLog } from '../audit/audit-reader.js';
import { hintboxEnvironment } from '../config/environment.js';
import { UsageError } from '../util/hintbox-error.js';
import { cliLog } from './common.js';
import { LineOutput } from './line-output.js';

/**
 * `hintbox audit verify [--public-key FILE]…` and `hintbox audit key --public`: the log's hash
 * chains checked, and each chain held against its signed checkpoints, with the public keys
 * given, else with hintbox's own key (the state folder's, or HINTBOX_AUDIT_KEY).
 */

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

export async function verifyAuditFolder(dir: string, publicKeyFiles: string[], named = true): Promise<number> {
  // A folder the operator named that is not there is a mistyped (or removed) one: it fails. The
  // default folder is made at the first recorded call: before that, there is nothing to verify.
  if (!existsSync(dir)) {
    if (named) {
      cliLog.error(`audit log ${dir} does not exist: nothing to verify (HINTBOX_AUDIT_DIR?)`);
      return 1;
    }
    process.stdout.write(`audit log ${dir}: nothing recorded yet (no call has been recorded here)\n`);
    return 0;
  }
  const publicKeys = verifyingKeys(publicKeyFiles);
  const chains = await verifyAuditLog(dir, { publicKeys });
  let broken = 0;
  let lines = 0;
  let torn = 0;
  let uncovered = 0;
  const out = new LineOutput();
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
        ? `audit log ${dir}: ${chains.length} chain(s), ${lines} line(s), every chain holds and matches its checkpoints signed by ${keys}${tornNote}${uncoveredNote}`
        : `audit log ${dir}: no chain yet (no record was written here)`,
  );
  await out.end();
  return broken ? 1 : 0;
}
