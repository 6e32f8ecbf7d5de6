/**
 * @redis/client is an optional peer dependency, looked up before connection.ts is loaded so that
 * a missing one is reported with the command that installs it. Imports nothing that needs it.
 */

import { createRequire } from 'node:module';
import { TickwheelDependencyError } from '../errors.js';

/** The client the cluster speaks through, and the range package.json's peerDependencies give. */
export const CLUSTER_PEER = { name: '@redis/client', range: '^6.3.1' } as const;

/** What needs @redis/client, as the missing-dependency message names it. */
const REDIS_QUEUE = 'a queue on Valkey/Redis (the redis option, or serve --redis)';
export const REDIS_IDEMPOTENCY_STORE = 'RedisIdempotencyStore (tickwheel/idempotent)';

/** Throws a TickwheelDependencyError naming `needs` when @redis/client cannot be found. */
export function checkClusterPeer(
  needs: string = REDIS_QUEUE,
  resolve: (name: string) => unknown = createRequire(import.meta.url).resolve,
): void {
  try {
    resolve(CLUSTER_PEER.name);
  } catch {
    const install = `npm install ${CLUSTER_PEER.name}@6`;
    throw new TickwheelDependencyError(
      `${needs} needs ${CLUSTER_PEER.name}, ` +
        `an optional peer dependency of tickwheel that is not installed: run \`${install}\``,
      [CLUSTER_PEER.name],
      install,
    );
  }
}
