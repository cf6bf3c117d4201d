import { DockerEngine } from '../engine/docker/docker-engine.js';
import { cliLog, profileArg } from './common.js';
import type { CommandSpec } from './main.js';
import { hintboxEnvironment } from '../config/environment.js';
import { UsageError } from '../util/hintbox-error.js';

const HELP = `Usage: hintbox images build <profile> [--rebuild]

Builds the image the profile's server runs in (server.image from server.build), and the bases
it needs: hintbox/node-server:bookworm on Debian bookworm. Where debian:bookworm-slim is
neither present nor pullable, it is seeded from Debian's archive with debootstrap (root).
A package.json in the build folder is installed on the host with npm and copied in.
Images whose build folder has not changed are kept. Progress goes to stderr.

Options:
  --rebuild   build even when the image looks current
  -h, --help  this help`;

export const imagesBuildCommand: CommandSpec = {
  help: HELP,
  options: { rebuild: { type: 'boolean' } },
  async run({ positionals, values }) {
    const [sub, ...rest] = positionals;
    if (sub !== 'build')
      throw new UsageError(`images: expected "build", got ${sub === undefined ? 'nothing' : `"${sub}"`}`);
    const profile = profileArg('images build', rest);
    const engine = await DockerEngine.connect({
      log: cliLog,
      ...(hintboxEnvironment().baseImage ? { baseImage: hintboxEnvironment().baseImage } : {}),
    });
    await engine.prepareImage(profile.server, { rebuild: values.rebuild === true });
    cliLog.info(`image ${profile.server.image} is ready`);
    return 0;
  },
};
