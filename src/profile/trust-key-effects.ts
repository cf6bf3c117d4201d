/**
 * Profile keys that can have no effect for the profile's trust level (pure). An operator who
 * writes `approval: allow` for an untrusted server expects it to run unasked; it never does
 * (every call of an untrusted server is confirmed, DESIGN rule 2), so the key is refused at
 * load, naming why, rather than ignored in silence.
 */

/** The parts of a parsed profile the check reads. */
export interface TrustKeyInput {
  trust: 'trusted' | 'untrusted';
  tools: Readonly<Record<string, { approval?: 'confirm' | 'deny' | 'allow' | undefined }>>;
  preApprove: readonly unknown[];
}

/** One key without effect: its field path and the one-line reason. */
export interface IneffectiveKey {
  /** The field's path, as parts (a tool's name may hold a dot). */
  at: readonly (string | number)[];
  message: string;
}

const UNTRUSTED_ASKS =
  'every call of an untrusted server is confirmed by a person whatever the profile says; set trust: trusted if you vouch for it, or use a standing answer (hintbox approve --always)';

/** The keys that have no effect for this trust, in field order; empty when all have one. */
export function ineffectiveKeys(profile: TrustKeyInput): IneffectiveKey[] {
  if (profile.trust === 'trusted') return [];
  const found: IneffectiveKey[] = [];
  for (const [tool, rule] of Object.entries(profile.tools)) {
    if (rule.approval === 'allow') {
      found.push({ at: ['tools', tool, 'approval'], message: `allow has no effect here: ${UNTRUSTED_ASKS}` });
    }
  }
  profile.preApprove.forEach((_, index) => {
    found.push({ at: ['preApprove', index], message: `a pre-approval has no effect here: ${UNTRUSTED_ASKS}` });
  });
  return found;
}
