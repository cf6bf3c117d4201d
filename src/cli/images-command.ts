import { DockerEngine } from '../engine/docker/docker-engine.js';
import { cliLog, profileArg } from './common.js';
import type { CommandSpec } from './command-spec.js';
import { hintboxEnvironment } from '../config/environment.js';
import { UsageError } from '../util/hintbox-error.js';

const HELP = `Usage: hintbox images build <profile> [--rebuild]
       hintbox images build --hintbox [--rebuild]

Builds the image the profile's server runs in (server.image from server.build, or from the
server.npm or server.pypi package, resolved into the package lock beside the profile), and the
bases it needs: hintbox/node-server:trixie or hintbox/python-server:trixie on Debian trixie.
Where debian:trixie-slim is neither present nor pullable, it is seeded from Debian's archive
with debootstrap (root). The package (or a package.json in the build folder) is installed on
the host and copied in: nothing is fetched inside a build.
Images whose build folder has not changed are kept. Progress goes to stderr.

With --hintbox, builds hintbox's own image, hintbox/hintbox:<version> (images/hintbox): this
hintbox's bundle and gate, the server bases' build folders and the shipped profiles, on Debian
trixie's Node.js 20 (debian:trixie-slim, else hintbox/debian-seed:trixie seeded the same way).
Build hintbox first (npm run build). A platform's image is FROM it (see README, "The hintbox image").

Options:
  --hintbox   build hintbox's own image instead of a profile's
  --rebuild   build even when the image looks current
  -h, --help  this help`;

export const imagesBuildCommand: CommandSpec = {
  help: HELP,
  options: { rebuild: { type: 'boolean' }, hintbox: { type: 'boolean' } },
  async run({ positionals, values }) {
    const [sub, ...rest] = positionals;
    if (sub !== 'build')
      throw new UsageError(`images: expected "build", got ${sub === undefined ? 'nothing' : `"${sub}"`}`);
    if (values.hintbox === true && rest.length > 0) {
      throw new UsageError('images build --hintbox: takes no profile (see hintbox images build --help)');
    }
    const profile = values.hintbox === true ? undefined : profileArg('images build', rest);
    const engine = await DockerEngine.connect({
      log: cliLog,
      ...(hintboxEnvironment().baseImage ? { baseImage: hintboxEnvironment().baseImage } : {}),
    });
    const rebuild = values.rebuild === true;
    if (!profile) {
      cliLog.info(`image ${await engine.prepareHintboxImage({ rebuild })} is ready`);
      return 0;
    }
    await engine.prepareImage(profile, { rebuild });
    cliLog.info(`image ${profile.server.image} is ready`);
    return 0;
  },
};
