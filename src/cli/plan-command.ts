import { sandboxId, strictestGrant } from '../policy/plan-sandboxes.js';
import { ceilingOf } from '../profile/profile-ceiling.js';
import { HintboxSession } from '../session/hintbox-session.js';
import { cliLog, engineReady, profileForListing } from './common.js';
import { formatPlanTable, formatSensitiveMounts, planToJson, sensitiveMounts } from './format-plan.js';
import type { CommandSpec } from './command-spec.js';
import { kubernetesPlan } from './kubernetes-plan.js';
import { UsageError } from '../util/hintbox-error.js';
import { VERSION } from '../version.js';

const HELP = `Usage: hintbox plan <profile> [--json] [--engine kubernetes [--namespace NS]]

Starts the server once in the strictest sandbox (read-only mounts, no network) to list its
tools, then prints the plan: per tool its claimed and effective hints, the hints clients are
told (advertised), its sandbox, that sandbox's mounts (ro/rw) and network, and whether its
hints are enforced by the sandbox; then each mount the profile lets hold a shell start-up file,
credentials or an agent socket (allowSensitive), with what it holds.
Prompts, resources, resource templates and completions are listed too: reading them changes
nothing by definition, so they are served by the strictest sandbox whatever the server claims.
The discovery container is removed before the command returns.

What it reads: the profile, the image (built if missing) and the variables the profile names.
It needs nothing only a run needs: a workspace the sandbox user cannot write is only warned
about, and an env entry whose variable is unset (a token) is left out (named on stderr) and
the server is listed without it.

Options:
  --json      print the plan as JSON (tools[], sandboxes[], rejected[], reads, sensitive[])
  --rebuild   rebuild the server's image even when it looks current
  --engine kubernetes
              print instead the Kubernetes objects a session would create (per sandbox a
              Pod and a deny-all NetworkPolicy; per egress class a proxy Pod, Service and
              NetworkPolicy), as YAML (--json: one List); the tools are still discovered with
              the local engine. Mounts become PersistentVolumeClaims hintbox-<mount name>.
              Database and open-network grants are refused (not rendered yet).
  --namespace NS
              the namespace of those objects (default: hintbox)
  -h, --help  this help`;

export const planCommand: CommandSpec = {
  help: HELP,
  options: {
    json: { type: 'boolean' },
    rebuild: { type: 'boolean' },
    engine: { type: 'string' },
    namespace: { type: 'string' },
  },
  async run({ positionals, values }) {
    const profile = profileForListing('plan', positionals);
    if (values.engine !== undefined && values.engine !== 'kubernetes' && values.engine !== 'docker') {
      throw new UsageError(`plan: --engine ${values.engine as string}: expected docker or kubernetes`);
    }
    const engine = await engineReady();
    await using session = await HintboxSession.open({
      profile,
      engine,
      log: cliLog,
      startAll: false,
      ...(values.rebuild ? { rebuildImages: true } : {}),
    });
    if (values.engine === 'kubernetes') {
      const { out, restricted } = kubernetesPlan({
        profile,
        plan: session.plan,
        identity: session.identity,
        image: await engine.prepareImage(profile),
        namespace: typeof values.namespace === 'string' ? values.namespace : 'hintbox',
        gateImage: `hintbox/hintbox:${VERSION}`,
        json: values.json === true,
      });
      for (const line of restricted) cliLog.warn(`not restricted Pod Security: ${line}`);
      process.stdout.write(out + '\n');
      return 0;
    }
    const { listed } = session.promptsAndResources;
    const reads = {
      sandbox: sandboxId(strictestGrant(ceilingOf(profile))),
      prompts: listed.prompts.length,
      resources: listed.resources.length,
      resourceTemplates: listed.resourceTemplates.length,
    };
    const args = [profile.name, session.plan, session.rejected, profile.hold, profile.annotations] as const;
    const sensitive = sensitiveMounts(profile.mounts);
    const out = values.json
      ? JSON.stringify({ ...(planToJson(...args) as object), reads, sensitive }, null, 2)
      : `${formatPlanTable(...args)}\n` +
        formatSensitiveMounts(profile.mounts)
          .map((line) => `${line}\n`)
          .join('') +
        `reads: ${reads.prompts} prompt(s), ${reads.resources} resource(s), ${reads.resourceTemplates} resource template(s) and completions ` +
        `are served by sandbox ${reads.sandbox} (read-only mounts, no network), whatever the server claims`;
    process.stdout.write(out + '\n');
    return 0;
  },
};
