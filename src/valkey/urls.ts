/**
 * The `redis` option: the URLs of a standalone server or of Cluster nodes, or one
 * redis+sentinel:// URL that names the Sentinels and the primary they monitor.
 */

import { describe, invalidOption } from '../validate.js';

/** The `redis` option as a list: one or more redis:// or rediss:// URLs, or a redis+sentinel:// one. */
export function checkRedisUrls(urls: unknown): string[] {
  const list: unknown[] = typeof urls === 'string' ? [urls] : Array.isArray(urls) ? [...urls] : [];
  if (
    list.length === 0 ||
    list.some((url) => typeof url !== 'string' || !/^(rediss?|redis\+sentinel):\/\/./.test(url))
  ) {
    throw invalidOption(
      `redis must be one or more redis:// or rediss:// URLs, or one redis+sentinel:// URL, got ${describe(urls)}`,
    );
  }
  return list as string[];
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
