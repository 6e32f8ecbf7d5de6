/**
 * The `redis` option: the URLs of a standalone server or of Cluster nodes, or one
 * redis+sentinel:// URL that names the Sentinels and the primary they monitor.
 */

import { describe, hidePassword, invalidOption } from '../validate.js';

/** The `redis` option as a list: one or more redis:// or rediss:// URLs, or a redis+sentinel:// one. */
export function checkRedisUrls(urls: unknown): string[] {
  const list: unknown[] = typeof urls === 'string' ? [urls] : Array.isArray(urls) ? [...urls] : [];
  const bad = list.findIndex(
    (url) => typeof url !== 'string' || !/^(rediss?|redis\+sentinel):\/\/./.test(url),
  );
  if (list.length === 0 || bad >= 0) {
    // The entry refused, not the list: `got object` would not say which.
    const shown = list.length === 0 ? urls : list[bad];
    const got = describe(typeof shown === 'string' ? hidePassword(shown) : shown);
    throw invalidOption(
      `redis must be one or more redis:// or rediss:// URLs, or one redis+sentinel:// URL, got ${got}`,
    );
  }
  for (const url of list as string[]) if (!url.startsWith('redis+sentinel:')) checkDatabase(url);
  return list as string[];
}

/** A redis:// URL's path, if any, is a database number (the client throws a bare TypeError). */
function checkDatabase(url: string): void {
  let path: string;
  try {
    path = new URL(url).pathname;
  } catch {
    throw invalidOption(`redis URL ${hidePassword(url)} is not a URL`);
  }
  if (path !== '' && path !== '/' && !/^\/\d{1,5}$/.test(path)) {
    throw invalidOption(
      `redis URL ${hidePassword(url)}: its path must be a database number such as /0, got ${JSON.stringify(path.slice(0, 40))}`,
    );
  }
}

/**
 * `redis+sentinel://[user:password@]host:port[,host:port...]/name`: the Sentinels and the name
 * they monitor (user and password are the data nodes'). Undefined for any other URL.
 */
export function parseSentinelUrl(url: string) {
  const match = /^redis\+sentinel:\/\/(?:([^:@/]*)(?::([^@/]*))?@)?([^/]+)\/([^/?#]+)\/?$/.exec(
    url,
  );
  if (match === null) return undefined;
  const [, user, password, hosts, name] = match;
  const sentinels = hosts.split(',').map((hostPort) => {
    const at = hostPort.lastIndexOf(':');
    const host = at < 0 ? hostPort : hostPort.slice(0, at);
    const port = at < 0 ? 26379 : Number(hostPort.slice(at + 1));
    if (host === '' || !Number.isInteger(port) || port < 1 || port > 65535) {
      throw invalidOption(
        `a Sentinel address must be host:port, got ${JSON.stringify(hostPort)} in ${url}`,
      );
    }
    return { host: host.replace(/^\[|\]$/g, ''), port };
  });
  return {
    name: decodeURIComponent(name),
    sentinels,
    ...(user ? { username: decodeURIComponent(user) } : {}),
    ...(password ? { password: decodeURIComponent(password) } : {}),
  };
}
