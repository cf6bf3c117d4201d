/**
 * Runs pip on the host so that no package code can run there: pip is started through a small
 * Python bootstrap that wraps pip's preparation step (`RequirementPreparer`) and refuses any
 * requirement that is not a wheel found on the index (a direct URL, a VCS URL, a local path, an
 * sdist, an editable) before pip downloads, unpacks or builds it. A check after `pip download`
 * would come too late: pip's resolver prepares a direct-URL candidate (running its sdist's
 * PEP 517 backend to read its metadata) as soon as it meets it, whatever `--only-binary` says.
 *
 * Behind that wrapper, a fence on new processes: pip may start no Python interpreter and no VCS
 * tool, which is how every build backend, setup.py and checkout runs. The guard fails closed: a
 * pip without the internals it wraps (pip 22 to 26 have them) is not run at all. It reports in
 * one stderr line that starts with {@link PIP_GUARD_PREFIX}.
 */

/** The start of the one line the guard writes when it refuses (exit 3) or cannot guard this pip (exit 4). */
const PIP_GUARD_PREFIX = 'hintbox-pip-guard: ';

// Python, run with `python3 -c`; the arguments after it are pip's. Kept free of backslashes and of
// `${` but the prefix's, so the template literal holds it as written.
const GUARD = `
import sys

# python3 -c puts the working folder first on sys.path: no file there may stand in for pip.
if sys.path and sys.path[0] in ("", "."):
    del sys.path[0]
PREFIX = ${JSON.stringify(PIP_GUARD_PREFIX)}
try:
    import pip
except ImportError:
    print("No module named pip", file=sys.stderr)
    sys.exit(1)
try:
    from pip._internal.cli.main import main
    from pip._internal.exceptions import InstallationError
    from pip._internal.models.link import Link
    from pip._internal.operations.prepare import RequirementPreparer
    from pip._internal.req.req_install import InstallRequirement

    WRAPPED = ("prepare_linked_requirement", "prepare_linked_requirements_more", "prepare_editable_requirement")
    for name in WRAPPED:
        if not callable(getattr(RequirementPreparer, name)):
            raise AttributeError(name)
    for name in ("is_wheel", "is_vcs", "is_file", "url", "filename"):
        getattr(Link, name)
    InstallRequirement.name
except (ImportError, AttributeError) as error:
    print(PREFIX + "pip %s on this host lacks the internals hintbox wraps to keep package code from running here (%s: %s); "
          "hintbox does not run it: use pip 22 to 26" % (getattr(pip, "__version__", "?"), type(error).__name__, error),
          file=sys.stderr)
    sys.exit(4)

MISSING = object()
refusals = []


class Refused(InstallationError):
    pass


def describe(req):
    direct = getattr(req, "original_link", MISSING)
    link = req.link
    if direct is MISSING:
        return None, "pip's requirement has no original_link, so hintbox cannot tell where it came from"
    if getattr(req, "editable", False):
        return direct or link, "an editable requirement"
    if direct is not None:
        if direct.is_vcs:
            return direct, "a VCS URL"
        return direct, "a direct URL to a local file" if direct.is_file else "a direct URL"
    if link is None:
        return None, "a requirement with no link"
    if link.is_vcs or not link.is_wheel:
        return link, "an sdist or source tree (pip would build it on this host)"
    return None, None


def asked_by(req):
    parent = req.comes_from
    if parent is None:
        return "the profile"
    if isinstance(parent, str):
        return parent
    link = getattr(parent, "link", None)
    return link.filename if link is not None and link.filename else str(getattr(parent, "req", parent))


def check(req):
    link, why = describe(req)
    if why is None:
        return
    name = req.name or "?"
    what = "%s @ %s" % (name, link.url) if link is not None else str(getattr(req, "req", None) or name)
    message = ("refused %s, required by %s: %s, not a wheel from the index; hintbox installs only wheels "
               "from the index, so that no package code runs on this host" % (what, asked_by(req), why))
    refusals.append(message)
    raise Refused(message)


def wrap(name, many):
    original = getattr(RequirementPreparer, name)

    def guarded(self, reqs, *args, **kwargs):
        if many:
            reqs = list(reqs)
        for req in reqs if many else [reqs]:
            check(req)
        return original(self, reqs, *args, **kwargs)

    setattr(RequirementPreparer, name, guarded)


wrap("prepare_linked_requirement", False)
wrap("prepare_editable_requirement", False)
wrap("prepare_linked_requirements_more", True)

# A second fence, for a path to a build the wrapper does not see: pip runs every build backend
# and setup.py with a Python interpreter and every checkout with a VCS tool, each a new process;
# resolving and installing wheels starts none (only probes of the host for pip's user agent:
# rustc, lsb_release). So no Python interpreter and no VCS tool may start.
import os
import shlex
import subprocess

Popen = subprocess.Popen
FENCED_TOOLS = ("git", "hg", "svn", "bzr", "brz")


def fenced(program):
    name = os.path.basename(program)
    if name.startswith("python") or name in FENCED_TOOLS:
        return True
    return os.path.realpath(program) == os.path.realpath(sys.executable)


class Fenced(Popen):
    def __init__(self, args, *rest, **kwargs):
        argv = shlex.split(args) if isinstance(args, str) else [os.fsdecode(arg) for arg in args]
        if isinstance(args, bytes) or not argv or fenced(argv[0]):
            message = ("refused to start %s: hintbox's pip starts no Python and no VCS tool (a build backend, "
                       "setup.py, git), so that no package code runs on this host" % " ".join(argv)[:300])
            refusals.append(message)
            raise Refused(message)
        super().__init__(args, *rest, **kwargs)


subprocess.Popen = Fenced

try:
    status = main(sys.argv[1:])
except SystemExit as exit:  # pip's option parser exits by itself
    status = exit.code
if refusals:
    print(PREFIX + refusals[0], file=sys.stderr)
    sys.exit(3)
sys.exit(status)
`;

/** `python3`'s arguments that run pip with `args` under the guard. */
export function guardedPipArgs(args: string[]): string[] {
  return ['-c', GUARD, ...args];
}

/** The guard's line in a failed run's output, if it wrote one. */
export function pipGuardLine(output: string): string | undefined {
  const line = output.split('\n').find((l) => l.startsWith(PIP_GUARD_PREFIX));
  return line?.slice(PIP_GUARD_PREFIX.length).trim();
}
