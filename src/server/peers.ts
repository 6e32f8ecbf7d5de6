/**
 * fastify and prom-client are optional peer dependencies (an install for the timers, the queue
 * or the client does not carry them): a missing one is reported by name, with the command that
 * installs it, rather than as a module-resolution error from inside dist/.
 */

import { createRequire } from 'node:module';
import { TickwheelDependencyError } from '../errors.js';

/** The server's packages and the ranges it supports; package.json's peerDependencies match. */
export const SERVER_PEERS: Readonly<Record<string, string>> = {
  fastify: '^5.12.8',
  'prom-client': '^15.1.3',
};

/** `fastify@5`: the major version of a `^x.y.z` range, which is what npm should install. */
function installSpec(name: string, range: string): string {
  const major = /^\^?(\d+)/.exec(range);
  return major === null ? name : `${name}@${major[1]}`;
}

/** The peers that `resolve` cannot find, from where the server's modules import them. */
export function missingServerPeers(
  resolve: (name: string) => unknown = createRequire(import.meta.url).resolve,
): string[] {
  return Object.keys(SERVER_PEERS).filter((name) => {
    try {
      resolve(name);
      return false;
    } catch {
      return true;
    }
  });
}

/** Throws a TickwheelDependencyError naming every missing peer; returns when all are there. */
export function checkServerPeers(missing: string[] = missingServerPeers()): void {
  if (missing.length === 0) return;
  const install = `npm install ${missing.map((name) => installSpec(name, SERVER_PEERS[name])).join(' ')}`;
  const names = missing.join(' and ');
  throw new TickwheelDependencyError(
    `the tickwheel server (tickwheel serve, tickwheel/server) needs ${names}, ` +
      `${missing.length === 1 ? 'an optional peer dependency' : 'optional peer dependencies'} ` +
      `of tickwheel that ${missing.length === 1 ? 'is' : 'are'} not installed: run \`${install}\``,
    missing,
    install,
  );
}
