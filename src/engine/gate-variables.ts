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
/** The proxy's socket in that folder. */
export const EGRESS_SOCKET_FILE = 'proxy.sock';
/** Where the relay listens in the sandbox (its own loopback), and so its proxy variables' URL. */
export const EGRESS_RELAY_URL = 'http://127.0.0.1:3128';

/** The relay's variables for a sandbox: on with `token` (an egress class), else both empty. Pure. */
export function egressRelayEnv(token: string | undefined): Record<string, string> {
  return token
    ? { [GATE_EGRESS_ENV]: `${SANDBOX_EGRESS_DIR}/${EGRESS_SOCKET_FILE}`, [GATE_EGRESS_TOKEN_ENV]: token }
    : { [GATE_EGRESS_ENV]: '', [GATE_EGRESS_TOKEN_ENV]: '' };
}
