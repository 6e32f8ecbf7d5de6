/**
 * The options of a node of a partitioned queue, whatever its store: their defaults and bounds,
 * and the settings it runs with. A store's own options (where it is, how durably it writes) are
 * its open path's.
 */

import { randomBytes } from 'node:crypto';
import { TickwheelRangeError } from '../errors.js';
import { faultOf, oncePer, type FaultHandler, type FaultReporter } from '../queue/faults.js';
import type { QueueLimits } from '../queue/options.js';
import { checkCallback, checkOption } from '../validate.js';

export interface PartitionedNodeOptions {
  /** The queue's name; several queues can share one store. Default 'default'. */
  queue?: string;
  /** Partitions of a new queue (an existing queue keeps its own). Default 64. */
  partitions?: number;
  /** Window of a new queue's far-future segments. Default 30,000 ms. */
  windowMs?: number;
  /** How far ahead owners keep messages in their wheel. Default 60,000 ms. */
  horizonMs?: number;
  /** Partition leases. Default 2,000 ms. */
  leaseMs?: number;
  visibilityMs?: number;
  maxPayloadBytes?: number;
  /** This node's id in the member list. Default: random. */
  nodeId?: string;
  maxClockSkewMs?: number;
  /** Errors of background work. Default: each distinct one once per 10 s as a fault. */
  onError?: (err: unknown) => void;
}

/** The options of a partitioned queue: the node's, and the ones every backend takes. */
export interface PartitionedQueueOptions extends PartitionedNodeOptions {
  /** Longest long-poll wait accepted by receive(). Default 60,000 ms. */
  maxWaitMs?: number;
  /** Internal addresses this node's pushes may reach (docs/push.md); default none. */
  push?: QueueLimits['push'];
  /** Takes the node's background faults with their codes (src/queue/faults.ts). */
  onFault?: FaultHandler;
  /** Whether acks and nacks wait for the store's durability unless a call says otherwise. Default false. */
  durableAcks?: boolean;
  /**
   * Recurring schedules the queue keeps at most, checked by each node's puts of new names in
   * the store's call that makes them. Default 100,000.
   */
  maxSchedules?: number;
}

/** A node's checked options, the defaults filled in. */
export type NodeSettings = Required<Omit<PartitionedNodeOptions, 'onError'>> & {
  onError: (err: unknown) => void;
  /** The least time between two fire calls of the node, where its store fires many at once. */
  fireIntervalMs: number;
  /**
   * How far ahead of their due time the node's owners fire messages, where the store's takes
   * hand out only messages due by the caller's clock (0 elsewhere).
   */
  fireAheadMs: number;
  maxSchedules: number;
};

/** Queue names and node ids name things in the store: no braces, no spaces, not empty. */
export const QUEUE_NAME_PATTERN = /^[A-Za-z0-9._:-]{1,64}$/;

export function checkQueueName(name: unknown, what = 'queue'): string {
  if (typeof name !== 'string' || !QUEUE_NAME_PATTERN.test(name)) {
    throw new TickwheelRangeError(
      'ERR_TICKWHEEL_INVALID_OPTION',
      `${what} must be 1 to 64 of A-Z a-z 0-9 . _ : -, got ${JSON.stringify(name)}`,
    );
  }
  return name;
}

/**
 * Checks a node's options (ERR_TICKWHEEL_INVALID_OPTION) and fills in the defaults; the options
 * every backend shares come from `limits`, checked by the queue (checkQueueOptions).
 */
export function checkNodeOptions(
  options: PartitionedNodeOptions,
  limits: QueueLimits,
  fireIntervalMs = 0,
  fireAheadMs = 0,
): NodeSettings {
  const queue = checkQueueName(options.queue ?? 'default');
  if (options.nodeId !== undefined) checkQueueName(options.nodeId, 'nodeId');
  const once = oncePer(10_000, limits.onFault);
  return {
    queue,
    partitions: checkOption(options.partitions ?? 64, 'partitions', 1, 16_384, true),
    windowMs: checkOption(options.windowMs ?? 30_000, 'windowMs', 100, 86_400_000, true),
    horizonMs: limits.horizonMs,
    leaseMs: checkOption(options.leaseMs ?? 2_000, 'leaseMs', 100, 60_000),
    visibilityMs: limits.visibilityMs,
    maxPayloadBytes: limits.maxPayloadBytes,
    nodeId: options.nodeId ?? `node-${randomBytes(6).toString('hex')}`,
    maxClockSkewMs: checkOption(options.maxClockSkewMs ?? 250, 'maxClockSkewMs', 0, 60_000),
    fireIntervalMs,
    fireAheadMs,
    maxSchedules: limits.maxSchedules,
    // Each distinct error at most once per 10 s: an outage fails every background call.
    onError: errorHandler(options.onError, once),
  };
}

/**
 * The `onError` option, checked, made safe as onFault is (src/queue/faults.ts): one that throws
 * reports the error as a fault and its own failure as ERR_TICKWHEEL_LISTENER_FAILED, rather
 * than failing the background work that called it.
 */
function errorHandler(
  handler: ((err: unknown) => void) | undefined,
  report: FaultReporter,
): (err: unknown) => void {
  if (handler === undefined) return (err) => report(faultOf(err));
  checkCallback(handler, 'onError');
  const failed = (err: unknown, thrown: unknown) => {
    report(faultOf(err));
    report(
      faultOf(thrown, {
        code: 'ERR_TICKWHEEL_LISTENER_FAILED',
        message: `onError threw: ${thrown instanceof Error ? thrown.message : String(thrown)}`,
      }),
    );
  };
  return (err) => {
    try {
      // An async handler's rejection too.
      const result: unknown = handler(err);
      if (typeof (result as PromiseLike<unknown> | undefined)?.then === 'function') {
        (result as PromiseLike<unknown>).then(undefined, (thrown: unknown) => failed(err, thrown));
      }
    } catch (thrown) {
      failed(err, thrown);
    }
  };
}
