import { randomBytes } from 'node:crypto';
/**
 * How every engine tells the sandbox gate (native/hintbox-gate.c) where hintbox is: the
 * variables it reads before the release (and unsets before the server runs), and the folder of
 * its socket inside the sandbox.
 */

/** Where the folder of the sandbox's socket is bound (read-only). */
export const SANDBOX_IO_DIR = '/run/hintbox/io';
/** The variable that tells the gate its socket; the gate unsets it before the server runs. */
export const GATE_SOCKET_ENV = 'HINTBOX_GATE_SOCKET';
/** The gate's token, sent first on its connection; the gate unsets it before the server runs. */
export const GATE_TOKEN_ENV = 'HINTBOX_GATE_TOKEN';
/**
 * The profile's own GLIBC_TUNABLES, as `=VALUE` (empty: none). The gate itself runs with
 * GLIBC_TUNABLES empty, and sets the server's from this (or unsets it), then unsets this.
 */
export const GATE_TUNABLES_ENV = 'HINTBOX_GATE_TUNABLES';
/**
 * The egress relay (a class with hosts by name, network none): the proxy's Unix socket inside
 * the sandbox. Always set, empty when the sandbox has no egress, so that an image's
 * `ENV HINTBOX_GATE_EGRESS=…` cannot turn the relay on. The gate unsets it before the server runs.
 */
export const GATE_EGRESS_ENV = 'HINTBOX_GATE_EGRESS';
/** The class's egress token, which the gate sends first on each relayed connection; always set, like the socket. */
export const GATE_EGRESS_TOKEN_ENV = 'HINTBOX_GATE_EGRESS_TOKEN';
/** Where the folder of the egress proxy's socket is bound (read-only in the sandbox, read-write in the proxy). */
export const SANDBOX_EGRESS_DIR = '/run/hintbox/egress';
/**
 * A new name for a proxy's socket in that folder: random, so that one who may traverse the
 * folder but not list it (a sandbox of the class, another local user when hintbox is not root)
 * can neither connect to it nor plant a file in its place before the proxy binds it.
 */
export function egressSocketFile(): string {
  return `p${randomBytes(6).toString('hex')}`;
}
/** Where the relay listens in the sandbox (its own loopback), and so its proxy variables' URL. */
export const EGRESS_RELAY_URL = 'http://127.0.0.1:3128';

/** The relay's variables for a sandbox: on with its proxy (an egress class), else both empty. Pure. */
export function egressRelayEnv(egress: { token: string; socketFile: string } | undefined): Record<string, string> {
  return egress
    ? { [GATE_EGRESS_ENV]: `${SANDBOX_EGRESS_DIR}/${egress.socketFile}`, [GATE_EGRESS_TOKEN_ENV]: egress.token }
    : { [GATE_EGRESS_ENV]: '', [GATE_EGRESS_TOKEN_ENV]: '' };
}
