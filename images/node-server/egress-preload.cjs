'use strict';
// hintbox's egress preload, baked into the Node base (/usr/lib/hintbox, root's, read-only) and
// loaded into every Node process of a sandbox by NODE_OPTIONS=--require. hintbox gives a sandbox
// with egress HTTP(S)_PROXY, and its proxy is the sandbox's only way out; Node 20 reads neither
// variable: its fetch (undici) and its http/https agents connect straight to the host, and find
// no route. So, only where a proxy is set, this points them at it, as a server's author would
// with a proxy agent, without changing the server:
// - the global undici dispatcher (Node's fetch, and the undici package where a server uses its
//   global dispatcher) goes through Debian's undici ProxyAgent, NO_PROXY's hosts straight;
// - http.globalAgent and https.globalAgent (http.request, got, node-fetch, ...) open a CONNECT
//   tunnel through the proxy to the host asked for, then speak HTTP or TLS inside it.
// A server that passes its own agent or dispatcher keeps it; a server that goes around the proxy
// (a raw socket, a dispatcher of its own without the proxy) has no route: this file is a
// convenience, not the fence. It never throws: a server starts as it would without it.
const proxyUrl = process.env.HTTPS_PROXY || process.env.https_proxy || process.env.HTTP_PROXY || process.env.http_proxy;

/** NO_PROXY's entries: `*`, a host, or a domain (`.example.com` or `example.com`: it and its subdomains). */
function bypassed(host) {
  const list = (process.env.NO_PROXY || process.env.no_proxy || '').split(',');
  const name = String(host)
    .replace(/^\[|\]$/g, '')
    .toLowerCase();
  return list.some((raw) => {
    const entry = raw.trim().toLowerCase().replace(/:\d+$/, '');
    if (!entry) return false;
    if (entry === '*') return true;
    const domain = entry.replace(/^\*?\./, '');
    return name === domain || name.endsWith(`.${domain}`);
  });
}

function install() {
  const net = require('node:net');
  const tls = require('node:tls');
  const http = require('node:http');
  const https = require('node:https');
  const proxy = new URL(proxyUrl);
  const proxyPort = Number(proxy.port) || 80;

  /** A socket to host:port through a CONNECT tunnel of the proxy; `callback(error, socket)`. */
  function tunnel(host, port, callback) {
    const target = `${net.isIPv6(host) ? `[${host}]` : host}:${port}`;
    const socket = net.connect(proxyPort, proxy.hostname);
    let head = Buffer.alloc(0);
    const fail = (error) => {
      socket.destroy();
      callback(error);
    };
    const onData = (chunk) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) {
        if (head.length > 16384) fail(new Error('the egress proxy sent an over-long answer'));
        return;
      }
      socket.off('data', onData);
      socket.off('error', fail);
      const status = head.subarray(0, head.indexOf('\r\n')).toString('latin1');
      if (!/^HTTP\/1\.[01] 200/.test(status)) {
        const error = new Error(`the egress proxy refused ${target}: ${status}`);
        error.code = 'EHINTBOXPROXY';
        fail(error);
        return;
      }
      const rest = head.subarray(end + 4);
      if (rest.length > 0) socket.unshift(rest);
      callback(null, socket);
    };
    socket.on('data', onData);
    socket.once('error', fail);
    socket.once('connect', () => socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`));
  }

  const direct = (host, port) => bypassed(host) || (host === proxy.hostname && Number(port) === proxyPort);

  class ProxyHttpAgent extends http.Agent {
    createConnection(options, callback) {
      const host = options.host || 'localhost';
      const port = options.port || 80;
      // A client that speaks to the proxy itself (an absolute URL as the request target) goes straight to it.
      if (direct(host, port)) return super.createConnection(options, callback);
      tunnel(host, port, callback);
      return undefined;
    }
  }

  class ProxyHttpsAgent extends https.Agent {
    createConnection(options, callback) {
      const host = options.host || 'localhost';
      const port = options.port || 443;
      if (direct(host, port)) return super.createConnection(options, callback);
      tunnel(host, port, (error, socket) => {
        if (error) return callback(error);
        const servername = options.servername || (net.isIP(host) ? undefined : host);
        // Handed over at once, as https.Agent does: the request waits for the handshake itself.
        callback(null, tls.connect({ ...options, socket, servername }));
        return undefined;
      });
      return undefined;
    }
  }

  http.globalAgent = new ProxyHttpAgent({ keepAlive: true });
  https.globalAgent = new ProxyHttpsAgent({ keepAlive: true });

  // Debian's undici (node-undici, a dependency of its nodejs): Node 20's own is not importable.
  // Its EnvHttpProxyAgent would do, but warns on stderr that it is experimental; this is the same
  // with the NO_PROXY rule above.
  const undici = require('/usr/share/nodejs/undici');
  const viaProxy = new undici.ProxyAgent(proxyUrl);
  const straight = new undici.Agent();
  class ProxyDispatcher extends undici.Dispatcher {
    dispatch(options, handler) {
      const { hostname } = new URL(String(options.origin));
      return (bypassed(hostname) ? straight : viaProxy).dispatch(options, handler);
    }
    close() {
      return Promise.all([viaProxy.close(), straight.close()]).then(() => undefined);
    }
    destroy(error) {
      return Promise.all([viaProxy.destroy(error), straight.destroy(error)]).then(() => undefined);
    }
  }
  undici.setGlobalDispatcher(new ProxyDispatcher());
}

if (proxyUrl) {
  try {
    install();
  } catch (error) {
    process.emitWarning(`hintbox egress preload: ${error && error.message}`);
  }
}
