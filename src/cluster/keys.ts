/**
 * Names of the cluster's keys (docs/cluster.md, "Data layout"). A partition's keys share the
 * hash tag `{queue:partition}`, so they live in one slot and one function call changes them
 * atomically; the queue-wide keys share `{queue}`.
 */

import { TickwheelRangeError } from '../errors.js';

/** Queue names go inside hash tags and key names: no braces, no spaces, not empty. */
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

/** The `meta` key of a partition: the key every function call names. */
export function metaKey(queue: string, partition: number): string {
  return `tw:{${queue}:${partition}}:meta`;
}

export function partitionPrefix(queue: string, partition: number): string {
  return `tw:{${queue}:${partition}}:`;
}

export function configKey(queue: string): string {
  return `tw:{${queue}}:config`;
}

/** Topics' settings (pause, rate limit): a hash, topic -> JSON. */
export function topicsKey(queue: string): string {
  return `tw:{${queue}}:topics`;
}

/** Topics' push targets: apart from the other settings, which errors quote (secrets). */
export function pushKey(queue: string): string {
  return `tw:{${queue}}:push`;
}

/** A rate-limited topic's token bucket (lua/tokens.lua, tw_tokens). */
export function tokensKey(queue: string, topic: string): string {
  return `tw:{${queue}}:tokens:${topic}`;
}

export function nodesKey(queue: string): string {
  return `tw:{${queue}}:nodes`;
}

/** The sharded channel of a partition's events (near segment grew, ready in a topic, ...). */
export function eventsChannel(queue: string, partition: number): string {
  return `tw:{${queue}:${partition}}:ev`;
}
