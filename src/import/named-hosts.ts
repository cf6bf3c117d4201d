/**
 * The hosts an imported server says it reaches: each `http(s)://` URL written literally in what
 * its entry gives it (a registry entry's remotes and the values and defaults of its arguments and
 * variables; a client config entry's arguments and env values), as `host:port` for the profile's
 * `network.allow`. Pure.
 *
 * Only public DNS names are proposed: an IP address, `localhost`, a name without a dot or a
 * templated one (`https://{HOST}/api`) is none (the egress proxy refuses private addresses
 * anyway, and a template names no host yet). Nothing but the host and port is taken from a URL:
 * never its user, password, path or query (which may hold a secret).
 */
export function namedHosts(values: readonly unknown[]): string[] {
  const found = new Set<string>();
  for (const text of values) {
    if (typeof text !== 'string') continue;
    for (const [written] of text.matchAll(/\bhttps?:\/\/[^\s"'<>]+/gi)) {
      if (/[{}]/.test(written)) continue;
      let url: URL;
      try {
        url = new URL(written);
      } catch (error) {
        if (error instanceof TypeError) continue; // not a URL after all
        throw error;
      }
      const host = url.hostname.toLowerCase();
      if (!/^(?=.*[a-z])[a-z0-9-]+(\.[a-z0-9-]+)+$/.test(host) || /\.\d+$/.test(host)) continue;
      found.add(`${host}:${url.port || (url.protocol === 'https:' ? '443' : '80')}`);
    }
  }
  return [...found].sort();
}
