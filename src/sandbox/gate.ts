import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { chmod, chown, mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { packagePath } from '../util/package-root.js';

/**
 * hintbox's sandbox gate (native/hintbox-gate.c): a static binary bound read-only into every
 * sandbox as its first program. It connects to a Unix socket of hintbox's, waits to be
 * released, and then runs the server with that connection as its stdin and stdout. So a
 * sandbox can be created and started before hintbox knows it will need it (nothing of the
 * image runs until the release), and MCP traffic bypasses Docker's attach path.
 */

/** Where the gate binary is bound in every sandbox. */
export const SANDBOX_GATE_PATH = '/run/hintbox/gate';
/** Where the folder of the sandbox's socket is bound (read-only). */
export const SANDBOX_IO_DIR = '/run/hintbox/io';
/** The variable that tells the gate its socket; the gate unsets it before the server runs. */
export const GATE_SOCKET_ENV = 'HINTBOX_GATE_SOCKET';
/** The byte that releases a gate. */
const RELEASE = 'G';
/** Host folders of gate sockets are named so: a sweep finds those of killed runs. */
export const IO_DIR_PREFIX = 'hintbox-io-';

export class GateError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GateError';
  }
}

/** ELF e_machine of each Node.js arch the gate may be built for. */
const ELF_MACHINE: Partial<Record<NodeJS.Architecture, number>> = { x64: 62, arm64: 183, arm: 40, ia32: 3 };
const PT_INTERP = 3;

/**
 * Why an executable cannot be the gate, or undefined if it can: it must be a 64-bit
 * little-endian ELF for this machine and statically linked (no program interpreter — the
 * image's dynamic loader would run before the gate). Pure.
 */
export function gateBinaryProblem(elf: Buffer, arch: NodeJS.Architecture): string | undefined {
  if (elf.length < 64 || elf.readUInt32BE(0) !== 0x7f454c46) return 'not an ELF executable';
  if (elf[4] !== 2 || elf[5] !== 1) return 'not a 64-bit little-endian ELF';
  const machine = elf.readUInt16LE(0x12);
  if (ELF_MACHINE[arch] !== machine) return `built for ELF machine ${machine}, but this is ${arch}`;
  const phoff = Number(elf.readBigUInt64LE(0x20));
  const phentsize = elf.readUInt16LE(0x36);
  const phnum = elf.readUInt16LE(0x38);
  if (phoff + phnum * phentsize > elf.length) return 'its program headers are cut short';
  for (let i = 0; i < phnum; i++) {
    if (elf.readUInt32LE(phoff + i * phentsize) === PT_INTERP) {
      return 'dynamically linked (it names a program interpreter); it must be static';
    }
  }
  return undefined;
}

let checkedGate: string | undefined;

/** The host path of the gate binary, checked once per process. Throws a GateError naming the fix. */
export function gateBinary(file = packagePath('dist', 'hintbox-gate')): string {
  if (checkedGate === file) return file;
  if (!existsSync(file)) {
    throw new GateError(
      `hintbox's sandbox gate ${file} is missing: build it with \`npm run build\` (needs a C compiler and a static libc)`,
    );
  }
  const problem = gateBinaryProblem(readFileSync(file), process.arch);
  if (problem) throw new GateError(`hintbox's sandbox gate ${file} cannot be used: ${problem}`);
  checkedGate = file;
  return file;
}

/** The socket one sandbox's gate connects to, in a fresh folder of its own on the host. */
export interface GateSocket {
  /** Host folder, bound read-only at SANDBOX_IO_DIR. */
  readonly hostDir: string;
  /** The socket's path inside the sandbox (the gate's HINTBOX_GATE_SOCKET). */
  readonly sandboxPath: string;
  /** The gate's connection; only the first is taken, then the folder is removed. */
  readonly connection: Promise<net.Socket>;
  /** Stops listening and removes the folder (idempotent); a pending `connection` rejects. */
  close(): Promise<void>;
}

/** Unix socket paths are limited (108 bytes on Linux with the NUL). */
const MAX_SOCKET_PATH_BYTES = 103;

/**
 * Listens for one sandbox's gate. Who can connect: the sandbox's user (and root). When hintbox
 * runs as that user the folder is private; as root it is given to the sandbox user; otherwise
 * others may traverse (not list) it, and the socket's random name is the secret, handed to the
 * gate in its environment (readable by its own user only), never on a command line.
 */
export async function openGateSocket(options: {
  sandboxUser: { uid: number; gid: number };
  baseDir?: string;
}): Promise<GateSocket> {
  const hostDir = await mkdtemp(path.join(options.baseDir ?? os.tmpdir(), IO_DIR_PREFIX));
  const name = `${randomBytes(16).toString('hex')}.sock`;
  const socketPath = path.join(hostDir, name);
  const server = net.createServer();
  let settle: { resolve: (s: net.Socket) => void; reject: (e: Error) => void } | undefined;
  const connection = new Promise<net.Socket>((resolve, reject) => (settle = { resolve, reject }));
  connection.catch(() => undefined);
  let closed: Promise<void> | undefined;
  const close = (): Promise<void> =>
    (closed ??= (async () => {
      settle?.reject(new GateError('the sandbox gate never connected'));
      // Stops listening at once; the callback would wait for the gate's connection to end.
      server.close();
      await rm(hostDir, { recursive: true, force: true });
    })());
  server.on('connection', (socket) => {
    if (!settle) {
      socket.destroy(); // only the first connection is the gate's
      return;
    }
    const { resolve } = settle;
    settle = undefined;
    resolve(socket);
    void close();
  });
  try {
    if (Buffer.byteLength(socketPath) > MAX_SOCKET_PATH_BYTES) {
      throw new GateError(`socket path ${socketPath} is too long for a Unix socket; set TMPDIR to a shorter folder`);
    }
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(socketPath, () => {
        server.off('error', reject);
        resolve();
      });
    });
    const me = process.getuid?.();
    const { uid, gid } = options.sandboxUser;
    if (uid === me) {
      await chmod(socketPath, 0o600);
    } else if (me === 0) {
      await chown(hostDir, uid, gid);
      await chown(socketPath, uid, gid);
      await chmod(socketPath, 0o600);
    } else {
      await chmod(hostDir, 0o711);
      await chmod(socketPath, 0o666);
    }
  } catch (error) {
    await close();
    throw error;
  }
  return { hostDir, sandboxPath: path.posix.join(SANDBOX_IO_DIR, name), connection, close };
}

/** Lets the gate run the server on `socket`. */
export function releaseGate(socket: net.Socket): void {
  socket.write(RELEASE);
}
