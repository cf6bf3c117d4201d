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
