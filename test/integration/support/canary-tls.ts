import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { scratchFolder } from '../../support/scratch-folder.js';

/**
 * A self-signed key and certificate (PEM) for a canary that stands in for an HTTPS host; made
 * by the host's openssl, valid a day. A client is told not to verify it (each in its own way).
 */
export function canaryCertificate(commonName = 'canary'): { key: string; cert: string } {
  const dir = scratchFolder('hintbox-canary-tls-');
  const [key, cert] = [path.join(dir, 'key.pem'), path.join(dir, 'cert.pem')];
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '1',
      '-subj',
      `/CN=${commonName}`,
      '-keyout',
      key,
      '-out',
      cert,
    ],
    { stdio: 'ignore' },
  );
  return { key: readFileSync(key, 'utf8'), cert: readFileSync(cert, 'utf8') };
}
