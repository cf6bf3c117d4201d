import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { closeSync, constants, fstatSync, mkdirSync, openSync, readFileSync, realpathSync, writeSync } from 'node:fs';
import path from 'node:path';

/**
 * hintbox's audit signing key: an Ed25519 key in a PEM file (PKCS#8) that signs the audit log's
 * checkpoints (`audit-checkpoint.ts`). It lives outside the audit folder (whoever can write the
 * log must not also hold the key) and, by default, in the state folder, which no sandbox may
 * mount. Created owner-only (0600) at first use; a key file others can read is refused, because
 * a key anyone can read proves nothing. An auditor needs only the public key
 * (`hintbox audit key --public`).
 */
export interface AuditKey {
  privateKey: KeyObject;
  publicKey: KeyObject;
  /** Names the key in each checkpoint: `sha256:` and the first 32 hex digits of its SPKI DER. */
  id: string;
}

/** The id of a public key, as checkpoints name it. */
export function auditKeyId(publicKey: KeyObject): string {
  const der = publicKey.export({ type: 'spki', format: 'der' });
  return `sha256:${createHash('sha256').update(der).digest('hex').slice(0, 32)}`;
}

/** The public key as PEM (SPKI), what `hintbox audit key --public` prints. */
export function publicKeyPem(key: AuditKey): string {
  return key.publicKey.export({ type: 'spki', format: 'pem' }).toString();
}

/** An Ed25519 key from its private key. */
export function auditKeyOf(privateKey: KeyObject): AuditKey {
  if (privateKey.asymmetricKeyType !== 'ed25519') {
    throw new Error(`expected an Ed25519 key, found ${privateKey.asymmetricKeyType ?? 'a symmetric key'}`);
  }
  const publicKey = createPublicKey(privateKey);
  return { privateKey, publicKey, id: auditKeyId(publicKey) };
}

/**
 * Reads the key at `file`, or creates it there when it does not exist and `create` is set.
 * Throws, naming the file, when it lies inside `auditDir`, is not a regular file of this user's,
 * can be read by group or others, or does not hold an Ed25519 private key.
 */
export function openAuditKey(file: string, options: { auditDir: string; create: boolean }): AuditKey {
  const where = (message: string): Error => new Error(`audit key ${file}: ${message}`);
  if (isInside(realParent(file), realPath(options.auditDir))) {
    throw where('it is inside the audit folder: whoever can write the log would hold the key (HINTBOX_AUDIT_KEY)');
  }
  let fd: number;
  try {
    // O_NOFOLLOW: a symlink planted at the key's path is not followed to some other file.
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' && options.create) return createAuditKey(file, options);
    if (code === 'ENOENT') throw where('no such file (it is made by the first hintbox run; or give --public-key)');
    if (code === 'ELOOP') throw where('is a symbolic link: give the file itself');
    throw where((error as Error).message);
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) throw where('is not a regular file');
    const uid = process.getuid?.();
    if (uid !== undefined && stat.uid !== uid) throw where(`belongs to uid ${stat.uid}, not to this user (${uid})`);
    if ((stat.mode & 0o077) !== 0) {
      const mode = (stat.mode & 0o777).toString(8).padStart(4, '0');
      throw where(`can be read by others (mode ${mode}): a key others can read proves nothing; chmod 600 it`);
    }
    let privateKey: KeyObject;
    try {
      privateKey = createPrivateKey(readFileSync(fd));
    } catch (error) {
      throw where(`not a private key in PEM: ${(error as Error).message}`);
    }
    try {
      return auditKeyOf(privateKey);
    } catch (error) {
      throw where((error as Error).message);
    }
  } finally {
    closeSync(fd);
  }
}

function createAuditKey(file: string, options: { auditDir: string; create: boolean }): AuditKey {
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const { privateKey } = generateKeyPairSync('ed25519');
  let fd: number;
  try {
    fd = openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  } catch (error) {
    // Another hintbox made it first: use that one.
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return openAuditKey(file, { ...options, create: false });
    throw new Error(`audit key ${file}: cannot create it: ${(error as Error).message}`);
  }
  try {
    writeSync(fd, privateKey.export({ type: 'pkcs8', format: 'pem' }).toString());
  } finally {
    closeSync(fd);
  }
  return auditKeyOf(privateKey);
}

/** The real path of `file`'s folder joined with its name (the file itself may not exist yet). */
function realParent(file: string): string {
  return path.join(realPath(path.dirname(file)), path.basename(file));
}

/** The real path of `p`, or of its nearest existing ancestor joined with the rest. */
function realPath(p: string): string {
  const absolute = path.resolve(p);
  try {
    return realpathSync(absolute);
  } catch {
    const parent = path.dirname(absolute);
    return parent === absolute ? absolute : path.join(realPath(parent), path.basename(absolute));
  }
}

function isInside(child: string, parent: string): boolean {
  const relative = path.relative(parent, child);
  return relative === '' || (!relative.startsWith('..') && !path.isAbsolute(relative));
}

/** Reads a public key (PEM, SPKI) an auditor was given. */
export function readPublicKey(file: string): KeyObject {
  let key: KeyObject;
  try {
    key = createPublicKey(readFileSync(file));
  } catch (error) {
    throw new Error(`--public-key ${file}: not a public key in PEM: ${(error as Error).message}`);
  }
  if (key.asymmetricKeyType !== 'ed25519') throw new Error(`--public-key ${file}: expected an Ed25519 key`);
  return key;
}
