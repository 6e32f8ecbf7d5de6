/**
 * A node of a queue on Valkey/Redis (docs/cluster.md): its options, and the path that opens it.
 * Connects (trying an absent server until `connectTimeoutMs`, reach.ts), keeps the durability
 * the replicas allow (durability.ts), loads the Functions library, reads the queue's fixed
 * settings as the first node wrote them, and starts a PartitionedBackend over a ValkeyDriver.
 */

import type { QueueLimits } from '../queue/options.js';
import type { QueueReport } from '../queue/report.js';
import { PartitionedBackend } from '../partitioned/backend.js';
import { checkNodeOptions, type PartitionedQueueOptions } from '../partitioned/node-options.js';
import { checkOption } from '../validate.js';
import { untilReachable } from '../valkey/reach.js';
import { ValkeyDriver } from './driver.js';
import { checkDurability, chooseDurability, type DurabilityOption } from './durability.js';
import { ClusterValkey } from './functions.js';

/** The options of a queue on Valkey/Redis: where it is, how durably it writes, and the node's. */
export interface ClusterQueueOptions extends PartitionedQueueOptions {
  /** Valkey/Redis URL(s): one standalone primary, or any nodes of a Cluster. */
  redis: string | readonly string[];
  /** When a write is acknowledged (durability.ts). Default 'auto'. */
  durability?: DurabilityOption;
  /** How long open() keeps trying to reach Valkey/Redis. Default 10 s. */
  connectTimeoutMs?: number;
}

export async function openClusterBackend(
  options: ClusterQueueOptions,
  limits: QueueLimits,
  report: QueueReport,
): Promise<PartitionedBackend> {
  const settings = checkNodeOptions(options, limits);
  const asked = checkDurability(options.durability ?? 'auto');
  const timeoutMs = options.connectTimeoutMs ?? 10_000;
  const connectTimeoutMs = checkOption(timeoutMs, 'connectTimeoutMs', 1, 600_000);
  const urls = Array.isArray(options.redis) ? [...options.redis] : [String(options.redis)];
  return untilReachable(urls, connectTimeoutMs, async (leftMs) => {
    const valkey = await ClusterValkey.connect(options.redis, leftMs);
    // Calls made while opening are bounded by the time left, so that the whole open is.
    valkey.limitCalls(leftMs);
    let writes = valkey;
    let backend: PartitionedBackend | undefined;
    try {
      const { durability, reason } = chooseDurability(asked, await valkey.replicasPerPrimary());
      // The writes' own connection: a WAIT holds it until replicas answer.
      if (durability !== 'async') {
        writes = (await ClusterValkey.connect(options.redis, leftMs)).pin();
      }
      await valkey.loadLibrary();
      const driver = new ValkeyDriver(valkey, writes, {
        queue: settings.queue,
        durability,
        durabilityOption: asked,
        durabilityReason: reason,
        onError: (err) => settings.onError(err),
      });
      const stored = await driver.config(settings.partitions, settings.windowMs);
      backend = new PartitionedBackend(driver, { ...settings, ...stored }, report, limits.onFault);
      await backend.start();
      valkey.limitCalls(undefined);
      return backend;
    } catch (err) {
      backend?.abandon();
      valkey.destroy();
      if (writes !== valkey) writes.destroy();
      throw err;
    }
  });
}
