// Writes docs/security.md from docs/security.source.md and test/security-invariants.ts
// (`npm run docs`; run under tsx, which loads the TypeScript modules). The rendering is
// test/support/security-doc.ts, which test/unit/security-doc.test.ts checks the page against.
import { readFileSync, writeFileSync } from 'node:fs';
import process from 'node:process';
import { URL, fileURLToPath } from 'node:url';
import { SECURITY_INVARIANTS } from '../test/security-invariants.ts';
import { renderSecurityDoc, SECURITY_DOC, SECURITY_DOC_SOURCE } from '../test/support/security-doc.ts';

const repo = fileURLToPath(new URL('../', import.meta.url));
const source = readFileSync(repo + SECURITY_DOC_SOURCE, 'utf8');
writeFileSync(repo + SECURITY_DOC, renderSecurityDoc(source, SECURITY_INVARIANTS));
process.stderr.write(`wrote ${SECURITY_DOC} (${SECURITY_INVARIANTS.length} invariants)\n`);
