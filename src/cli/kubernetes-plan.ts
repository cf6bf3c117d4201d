import { stringify } from 'yaml';
import type { SandboxPlan } from '../policy/plan-sandboxes.js';
import type { Profile } from '../profile/load-profile.js';
import type { PreparedImage, SessionIdentity } from '../engine/sandbox-engine.js';
import { renderSession } from '../engine/kubernetes/render-session.js';
import { HINTBOX_IMAGE_GATE_PATH } from '../engine/kubernetes/sandbox-pod.js';

/**
 * `hintbox plan --engine kubernetes`: the objects a session of the planned sandboxes would be on
 * a cluster (engine/kubernetes/), as YAML documents or, with `--json`, one `List`. The gate's
 * token is a placeholder (a session makes its own); the sandbox user is the profile's
 * `server.user`, else 10001 (hintbox's own uid means nothing on a node); mounts are the operator's
 * PersistentVolumeClaims `hintbox-<mount name>`. Breaches of the restricted Pod Security level
 * are listed on stderr (there are none unless the profile's mounts are hostPath).
 */
export function kubernetesPlan(options: {
  profile: Profile;
  plan: SandboxPlan;
  identity: SessionIdentity;
  image: PreparedImage;
  namespace: string;
  gateImage: string;
  json: boolean;
}): { out: string; restricted: string[] } {
  const { profile } = options;
  const specs = options.plan.sandboxes.map((s) => ({
    session: options.identity,
    profile,
    sandboxId: s.id,
    grant: { network: s.network, mounts: s.mounts, ...(s.egress ? { egress: s.egress } : {}) },
    command: options.image.command,
  }));
  const { objects, restricted } = renderSession(specs, {
    namespace: options.namespace,
    gate: { image: options.gateImage, path: HINTBOX_IMAGE_GATE_PATH },
    channel: { kind: 'attach', token: 'set-by-the-session' },
  });
  const out = options.json
    ? JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }, null, 2)
    : objects.map((o) => stringify(o)).join('---\n');
  return { out, restricted };
}
