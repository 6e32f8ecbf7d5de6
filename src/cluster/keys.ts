/**
 * Names of the cluster's keys (docs/cluster.md, "Data layout"). A partition's keys share the
 * hash tag `{queue:partition}`, so they live in one slot and one function call changes them
 * atomically; the queue-wide keys share `{queue}`.
 */

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
