import path from 'node:path';
import { isStrictlyInside } from '../util/paths.js';

/**
 * Host paths that hand a sandbox the operator's shell, credentials or agents, but that a profile
 * may still mount with a named opt-in (`allowSensitive` on the mount): shell start-up files (a
 * line written there runs at the next login), credential stores, and agent sockets. A mount is
 * refused when its source is one, lies inside one, or contains one (so `$HOME` and `~/.config`
 * are refused too), unless the mount lists exactly those names. The hard denylist
 * (host-path-denylist.ts: ~/.ssh, ~/.aws, …) has no opt-in. Pure: the caller passes the home
 * folders, the variables and a realpath.
 */

/** Home entries: their names (relative to the home folder) are also the opt-in's names. */
const HOME_ENTRIES: Readonly<Record<string, string>> = {
  '.bashrc': 'a shell start-up file',
  '.bash_profile': 'a shell start-up file',
  '.bash_login': 'a shell start-up file',
  '.bash_logout': 'a shell start-up file',
  '.bash_aliases': 'a shell start-up file',
  '.profile': 'a shell start-up file',
  '.zshrc': 'a shell start-up file',
  '.zprofile': 'a shell start-up file',
  '.zshenv': 'a shell start-up file',
  '.zlogin': 'a shell start-up file',
  '.zlogout': 'a shell start-up file',
  '.config/fish': 'a shell start-up folder',
  '.config/autostart': 'programs started at login',
  '.config/systemd': 'user services started at login',
  '.local/share/systemd': 'user services started at login',
  '.config/environment.d': "the login session's environment (PATH, LD_PRELOAD)",
  '.pam_environment': "the login session's environment (PATH, LD_PRELOAD)",
  '.xprofile': 'a graphical session start-up file',
  '.xsessionrc': 'a graphical session start-up file',
  '.local/bin': "programs first on PATH (Debian's ~/.profile)",
  bin: "programs first on PATH (Debian's ~/.profile)",
  '.vimrc': "vim's start-up file (runs commands)",
  '.config/nvim': "Neovim's start-up files (run commands)",
  '.tmux.conf': "tmux's start-up file (runs commands)",
  '.config/pip': "pip's configuration (the index hintbox's host pip reads)",
  '.config/gh': "GitHub CLI's credentials",
  '.config/hub': "hub's credentials",
  '.git-credentials': "git's stored credentials",
  '.gitconfig': "git's configuration (credential helpers, hooks)",
  '.config/git': "git's configuration (credential helpers, hooks)",
  '.npmrc': "npm's configuration (registry tokens)",
  '.pypirc': 'PyPI upload credentials',
  '.cargo/credentials': "Cargo's registry tokens",
  '.cargo/credentials.toml': "Cargo's registry tokens",
  '.local/share/keyrings': 'the desktop keyring',
  '.password-store': "pass's password store",
};

/** Agent sockets and the folders that hold them: named by the variable that points to them. */
const SOCKET_ENTRIES: Readonly<Record<string, string>> = {
  SSH_AUTH_SOCK: "the ssh agent's socket",
  GPG_AGENT_INFO: "the gpg agent's socket",
  XDG_RUNTIME_DIR: "the user's runtime folder (agent and keyring sockets, the session bus)",
  '/run/user': "the users' runtime folders (agent and keyring sockets, the session bus)",
};

/** Every name `allowSensitive` may list: nothing else (no pattern, no "all"). */
export const SENSITIVE_NAMES = [...Object.keys(HOME_ENTRIES), ...Object.keys(SOCKET_ENTRIES)] as [string, ...string[]];

/** What the place an opt-in name stands for is: `a shell start-up file`. */
export function sensitiveWhat(name: string): string {
  return HOME_ENTRIES[name] ?? SOCKET_ENTRIES[name] ?? 'unknown';
}

/** One sensitive place on this host: its opt-in name, where it is, what it is. */
export interface SensitivePlace {
  name: string;
  path: string;
  what: string;
}

/**
 * The sensitive places for these home folders (as given and real) and variables (SSH_AUTH_SOCK,
 * GPG_AGENT_INFO's socket, XDG_RUNTIME_DIR). `real` resolves symlinks (or returns its input).
 */
export function sensitivePlaces(
  homes: readonly string[],
  vars: Readonly<Record<string, string | undefined>>,
  real: (p: string) => string = (p) => p,
): SensitivePlace[] {
  const places: SensitivePlace[] = [];
  const add = (name: string, what: string, p: string): void => {
    for (const at of new Set([path.resolve(p), real(path.resolve(p))]))
      if (!places.some((s) => s.name === name && s.path === at)) places.push({ name, path: at, what });
  };
  for (const home of homes)
    for (const [name, what] of Object.entries(HOME_ENTRIES)) add(name, what, path.join(home, name));
  const socketOf: Record<string, string | undefined> = {
    SSH_AUTH_SOCK: vars.SSH_AUTH_SOCK,
    // `path:pid:protocol`, as gpg-agent before 2.1 set it.
    GPG_AGENT_INFO: vars.GPG_AGENT_INFO?.split(':')[0],
    XDG_RUNTIME_DIR: vars.XDG_RUNTIME_DIR,
    '/run/user': '/run/user',
  };
  for (const [name, what] of Object.entries(SOCKET_ENTRIES)) {
    const at = socketOf[name];
    // Only an absolute path names a place; a relative one would name the profile's folder.
    if (at !== undefined && path.isAbsolute(at) && path.resolve(at) !== '/') add(name, what, at);
  }
  return places;
}

/** What a mount source touches of the sensitive places, and which of those its opt-in leaves out. */
export interface SensitiveCheck {
  /** One line for the source when it touches a place its `allowSensitive` does not list. */
  refused?: string;
  /** Names listed in `allowSensitive` that the source does not touch: each is a problem of its own. */
  unused: string[];
  /** The names the source touches (all listed when `refused` is undefined). */
  touched: string[];
}

/**
 * Checks one mount source (as written and real) against the sensitive places: refused unless
 * `allowed` names each place it is, lies in or contains; an allowed name it touches not is
 * reported too, so the opt-in always lists exactly what the mount holds. Pure.
 */
export function checkSensitive(
  sources: readonly string[],
  places: readonly SensitivePlace[],
  allowed: readonly string[] = [],
): SensitiveCheck {
  const hits = new Map<string, string>();
  for (const place of places) {
    for (const source of sources.map((s) => path.resolve(s))) {
      const how =
        source === place.path
          ? `${source} is ${place.what}`
          : isStrictlyInside(source, place.path)
            ? `${source} is inside ${place.path}, ${place.what}`
            : isStrictlyInside(place.path, source)
              ? `${source} contains ${place.path}, ${place.what}`
              : undefined;
      if (how && !hits.has(place.name)) hits.set(place.name, how);
    }
  }
  const touched = [...hits.keys()];
  const missing = touched.filter((name) => !allowed.includes(name));
  const unused = allowed.filter((name) => !hits.has(name));
  if (missing.length === 0) return { unused, touched };
  const reasons = missing.map((name) => hits.get(name) as string);
  const list = touched.map((name) => JSON.stringify(name)).join(', ');
  return {
    refused: `${reasons.join('; ')}: not mounted unless the mount lists it, allowSensitive: [${list}]`,
    unused,
    touched,
  };
}
