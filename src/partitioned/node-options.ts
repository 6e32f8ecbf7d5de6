/** A cluster node's options, their defaults and bounds, and the settings it runs with. */

import { randomBytes } from 'node:crypto';
import { faultOf, oncePer } from '../queue/faults.js';
import type { QueueLimits } from '../queue/options.js';
import { checkOption } from '../validate.js';
import { checkQueueName } from '../cluster/keys.js';
import type { Durability } from './producer.js';
import { checkDurability, type DurabilityOption } from '../cluster/durability.js';

export interface ClusterNodeOptions {
  /** Valkey/Redis URL(s): one standalone primary, or any nodes of a Cluster. */
  redis: string | readonly string[];
  /** The queue's name; several queues can share one Valkey. Default 'default'. */
  queue?: string;
  /** Partitions of a new queue (an existing queue keeps its own). Default 64. */
  partitions?: number;
  /** Window of a new queue's far-future segments. Default 30,000 ms. */
  windowMs?: number;
  /** How far ahead owners keep messages in their wheel. Default 60,000 ms. */
  horizonMs?: number;
  /** When a write is acknowledged (durability.ts). Default 'auto'. */
  durability?: DurabilityOption;
  /** Partition leases. Default 2,000 ms. */
  leaseMs?: number;
  visibilityMs?: number;
  maxPayloadBytes?: number;
  /** This node's id in the member list. Default: random. */
  nodeId?: string;
  maxClockSkewMs?: number;
  /** How long open() keeps trying to reach Valkey/Redis. Default 10 s. */
  connectTimeoutMs?: number;
  /** Errors of background work. Default: each distinct one once per 10 s as a fault. */
  onError?: (err: unknown) => void;
}

export type CheckedNodeOptions = Required<
  Omit<ClusterNodeOptions, 'redis' | 'onError' | 'connectTimeoutMs' | 'durability'>
> & { onError: (err: unknown) => void };

/** A node's checked options, and the durability chosen when it opened. */
export type NodeSettings = CheckedNodeOptions & {
  durability: Durability;
  durabilityOption: DurabilityOption;
  /** Why that one, in words for a log. */
  durabilityReason: string;
};

/**
 * Checks a node's options (ERR_TICKWHEEL_INVALID_OPTION) and fills in the defaults; the options
 * every backend shares come from `limits`, checked by the queue (checkQueueOptions).
 */
export function checkNodeOptions(options: ClusterNodeOptions, limits: QueueLimits) {
  const queue = checkQueueName(options.queue ?? 'default');
  const asked = checkDurability(options.durability ?? 'auto');
  if (options.nodeId !== undefined) checkQueueName(options.nodeId, 'nodeId');
  const timeoutMs = options.connectTimeoutMs ?? 10_000;
  const connectTimeoutMs = checkOption(timeoutMs, 'connectTimeoutMs', 1, 600_000);
  const once = oncePer(10_000, limits.onFault);
  const settings: CheckedNodeOptions = {
    queue,
    partitions: checkOption(options.partitions ?? 64, 'partitions', 1, 16_384, true),
    windowMs: checkOption(options.windowMs ?? 30_000, 'windowMs', 100, 86_400_000),
    horizonMs: limits.horizonMs,
    leaseMs: checkOption(options.leaseMs ?? 2_000, 'leaseMs', 100, 60_000),
    visibilityMs: limits.visibilityMs,
    maxPayloadBytes: limits.maxPayloadBytes,
    nodeId: options.nodeId ?? `node-${randomBytes(6).toString('hex')}`,
    maxClockSkewMs: checkOption(options.maxClockSkewMs ?? 250, 'maxClockSkewMs', 0, 60_000),
    // Each distinct error at most once per 10 s: an outage fails every background call.
    onError: options.onError ?? ((err: unknown) => once(faultOf(err))),
  };
  return { settings, asked, connectTimeoutMs };
}
