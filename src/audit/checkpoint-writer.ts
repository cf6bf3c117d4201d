import { closeSync, constants, fchmodSync, openSync, writeSync } from 'node:fs';
import path from 'node:path';
import { createPublicKey, type KeyObject } from 'node:crypto';
import type { Clock } from '../util/clock.js';
import type { Logger } from '../util/logger.js';
import { lineHash } from './audit-chain.js';
import { CHECKPOINTS_FILE, signCheckpoint, type ChainState, type CheckpointReason } from './audit-checkpoint.js';
import { auditKeyId } from './audit-key.js';
import { isoTime } from '../util/iso-time.js';

/** How often a chain is checkpointed besides at open, rotation and close. */
export interface CheckpointOptions {
  /** The Ed25519 private key that signs. */
  key: KeyObject;
  /** A checkpoint once this many records were written since the last. Default 1000. */
  everyRecords?: number;
  /** A checkpoint this many seconds after the last, if records were written since. Default 10. */
  everySeconds?: number;
}

export const DEFAULT_CHECKPOINT_RECORDS = 1000;
export const DEFAULT_CHECKPOINT_SECONDS = 10;

/**
 * Signs checkpoints of one chain into the audit folder's `checkpoints.jsonl` (O_APPEND: one
 * short line per write, shared by every hintbox process of the folder). Signing stays off the
 * per-record path: the record count only schedules a checkpoint (setImmediate), and a timer
 * catches a quiet chain; open, rotation and close sign at once, so a closed chain is covered
 * whole. What the records after the last checkpoint are is the crash window.
 */
export class CheckpointWriter {
  private readonly fd: number;
  private readonly keyId: string;
  private readonly everyRecords: number;
  private n = 0;
  private prev: string | null = null;
  private covered = -1;
  private scheduled: NodeJS.Immediate | undefined;
  private readonly timer: NodeJS.Timeout;

  private readonly chain: string;
  private readonly state: () => ChainState;
  private readonly clock: Clock;
  private readonly log: Logger;

  constructor(
    private readonly options: CheckpointOptions,
    where: { dir: string; chain: string; state: () => ChainState; clock: Clock; log: Logger },
  ) {
    ({ chain: this.chain, state: this.state, clock: this.clock, log: this.log } = where);
    this.keyId = auditKeyId(createPublicKey(options.key));
    this.everyRecords = options.everyRecords ?? DEFAULT_CHECKPOINT_RECORDS;
    const file = path.join(where.dir, CHECKPOINTS_FILE);
    this.fd = openSync(file, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW, 0o600);
    fchmodSync(this.fd, 0o600);
    const seconds = options.everySeconds ?? DEFAULT_CHECKPOINT_SECONDS;
    this.timer = setInterval(() => this.tryCheckpoint('interval'), seconds * 1000).unref();
  }

  /** Records were written: schedules a checkpoint once enough are not covered. Cheap. */
  written(records: number): void {
    if (records - this.covered >= this.everyRecords && !this.scheduled) {
      this.scheduled = setImmediate(() => {
        this.scheduled = undefined;
        this.tryCheckpoint('interval');
      });
    }
  }

  /** Signs a checkpoint of the chain as it is now; throws when it cannot be written. */
  checkpoint(reason: CheckpointReason): void {
    const state = this.state();
    if (reason === 'interval' && state.records === this.covered) return;
    const text = signCheckpoint(
      {
        chain: this.chain,
        n: this.n,
        reason,
        time: isoTime(this.clock.now()),
        ...state,
        prev: this.prev,
        key: this.keyId,
      },
      this.options.key,
    );
    const line = `${text}\n`;
    const written = writeSync(this.fd, line);
    if (written !== Buffer.byteLength(line)) throw new Error(`short write to ${CHECKPOINTS_FILE}`);
    this.n++;
    this.prev = lineHash(text);
    this.covered = state.records;
  }

  /** The last checkpoint (when it can be written), then the file is closed. */
  close(): void {
    this.stop();
    this.tryCheckpoint('close');
    closeSync(this.fd);
  }

  /** The chain's first checkpoint; when it cannot be written, this writer stops and it throws. */
  first(): void {
    try {
      this.checkpoint('open');
    } catch (error) {
      this.stop();
      closeSync(this.fd);
      throw error;
    }
  }

  /** No more checkpoints on the timer or by count. */
  stop(): void {
    clearInterval(this.timer);
    if (this.scheduled) clearImmediate(this.scheduled);
    this.scheduled = undefined;
  }

  /** A checkpoint that cannot be written is logged: the records stay in the log, only uncovered. */
  tryCheckpoint(reason: CheckpointReason): void {
    try {
      this.checkpoint(reason);
    } catch (error) {
      this.log.error(`could not write an audit checkpoint of chain ${this.chain}: ${(error as Error).message}`);
    }
  }
}
