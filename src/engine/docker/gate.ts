import { randomBytes, timingSafeEqual } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { packagePath } from '../../util/package-root.js';
import { listenFor, makeSocketFolder } from '../../util/unix-socket.js';
import { HintboxError } from '../../util/hintbox-error.js';
import { SANDBOX_IO_DIR } from '../gate-variables.js';

/**
 * hintbox's sandbox gate (native/hintbox-gate.c): a static binary bound read-only into every
 * sandbox as its first program (PID 1). It connects twice to a Unix socket of hintbox's, waits
 * to be released, and then runs the server with the first connection as its stdin and stdout,
 * staying to freeze and thaw it on commands over the second (gate-control.ts). So a sandbox
 * can be created and started before hintbox knows it will need it (nothing of the image runs
 * until the release), MCP traffic bypasses Docker's attach path, and a freeze costs no engine
 * round trip.
 */

/** Where the gate binary is bound in every sandbox. */
export const SANDBOX_GATE_PATH = '/run/hintbox/gate';
/** How long a connection may take to send the token. */
const TOKEN_DEADLINE_MS = 5000;
/** The byte that releases a gate. */
const RELEASE = 'G';
/** Host folders of gate sockets are named so: a sweep finds those of killed runs. */
export const IO_DIR_PREFIX = 'hintbox-io-';
/** The gate's socket in its folder: short, so that a long $TMPDIR still fits (see makeSocketFolder). */
const GATE_SOCKET_FILE = 'gate.sock';

export class GateError extends HintboxError {
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

/** The gate's two connections: the server's stdio, and the gate's own for freezing and thawing. */
export interface GateConnection {
  /** Becomes the server's stdin and stdout at the release. */
  stdio: net.Socket;
  /** The gate's commands (see gate-control.ts). */
  control: net.Socket;
}

/** The socket one sandbox's gate connects to, in a fresh folder of its own on the host. */
export interface GateSocket {
  /** Host folder, bound read-only at SANDBOX_IO_DIR. */
  readonly hostDir: string;
  /** The socket's path inside the sandbox (the gate's HINTBOX_GATE_SOCKET). */
  readonly sandboxPath: string;
  /** What the gate must send first (its HINTBOX_GATE_TOKEN). */
  readonly token: string;
  /** The gate's connections; only the first of each is taken, then the folder is removed. */
  readonly connection: Promise<GateConnection>;
  /** Stops listening and removes the folder (idempotent); a pending `connection` rejects. */
  close(): Promise<void>;
}

/**
 * Listens for one sandbox's gate. The gate proves itself with a random token it got in its
 * environment (readable only by its own user and root, never on a command line): the token
 * and a newline for the server's connection, the token, `+` and a newline for its control
 * connection. A connection that does not send one of them within a few seconds is dropped and
 * the socket keeps listening, so neither another local user (socket paths are public in
 * /proc/net/unix) nor another sandbox can take the sandbox's place. The folder is also closed
 * to others where hintbox can arrange it: private when hintbox runs as the sandbox user, given
 * to that user when hintbox is root, else others may only traverse it.
 */
export async function openGateSocket(options: {
  sandboxUser: { uid: number; gid: number };
  baseDir?: string;
}): Promise<GateSocket> {
  // The folder's name is random and the gate proves itself with the token: the socket's need not be.
  const name = GATE_SOCKET_FILE;
  const folder = await makeSocketFolder(IO_DIR_PREFIX, name, options.baseDir);
  const hostDir = folder.dir;
  const token = randomBytes(32).toString('hex');
  const proofs = { stdio: Buffer.from(`${token}\n`), control: Buffer.from(`${token}+\n`) };
  const longest = proofs.control.length;
  const socketPath = folder.socketPath;
  const server = net.createServer();
  let settle: { resolve: (c: GateConnection) => void; reject: (e: Error) => void } | undefined;
  const connection = new Promise<GateConnection>((resolve, reject) => (settle = { resolve, reject }));
  connection.catch(() => undefined);
  const taken: Partial<GateConnection> = {};
  const candidates = new Set<net.Socket>();
  let closed: Promise<void> | undefined;
  const close = (): Promise<void> =>
    (closed ??= (async () => {
      settle?.reject(new GateError('the sandbox gate never connected'));
      settle = undefined;
      for (const candidate of candidates) candidate.destroy();
      // Taken but not handed over (the other connection never came).
      if (!taken.stdio || !taken.control) for (const socket of Object.values(taken)) socket.destroy();
      // Stops listening at once; the callback would wait for the gate's connection to end.
      server.close();
      await rm(hostDir, { recursive: true, force: true }).catch(() => undefined);
    })());
  /** Which of the gate's connections `line` proves, if any (compared in constant time). */
  const roleOf = (line: Buffer): keyof GateConnection | undefined => {
    for (const role of ['stdio', 'control'] as const) {
      const proof = proofs[role];
      if (line.length === proof.length && timingSafeEqual(line, proof) && !taken[role]) return role;
    }
    return undefined;
  };
  server.on('error', () => void close());
  server.on('connection', (socket) => {
    if (!settle) {
      socket.destroy();
      return;
    }
    candidates.add(socket);
    let received = Buffer.alloc(0);
    const drop = (): void => {
      candidates.delete(socket);
      socket.destroy();
    };
    const timer = setTimeout(drop, TOKEN_DEADLINE_MS);
    socket.on('error', drop);
    const onData = (chunk: Buffer): void => {
      received = Buffer.concat([received, chunk]);
      const end = received.indexOf(0x0a);
      if (end < 0 && received.length < longest) return;
      clearTimeout(timer);
      socket.off('data', onData);
      candidates.delete(socket);
      // Not the gate: no proof, or more than one (the gate sends nothing else before its release).
      const role = end >= 0 && end + 1 === received.length ? roleOf(received) : undefined;
      if (!settle || !role) {
        socket.destroy();
        return;
      }
      socket.off('error', drop);
      socket.pause(); // until the transport reads it (see release in docker-sandbox.ts)
      taken[role] = socket;
      if (!taken.stdio || !taken.control) return;
      const { resolve } = settle;
      settle = undefined;
      resolve({ stdio: taken.stdio, control: taken.control });
      void close();
    };
    socket.on('data', onData);
  });
  try {
    await listenFor(server, hostDir, socketPath, options.sandboxUser, 'set TMPDIR to a shorter folder');
  } catch (error) {
    await close();
    throw error;
  }
  return { hostDir, sandboxPath: path.posix.join(SANDBOX_IO_DIR, name), token, connection, close };
}

/** Lets the gate run the server on `socket`. */
export function releaseGate(socket: net.Socket): void {
  socket.write(RELEASE);
}
