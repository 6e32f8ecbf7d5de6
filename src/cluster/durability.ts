/**
 * Which durability a node keeps, decided once when it opens (docs/cluster.md, "Durability
 * settings"): 'auto' is 'replicated' if any primary has a replica, else 'async'; 'replicated'
 * and 'fsynced' are refused if none has (TickwheelNoReplicaError). "Any", not "every": a
 * Cluster short of a replica for a moment (a failover) keeps its durability, that shard's
 * writes failing ERR_TICKWHEEL_NOT_DURABLE; lost replicas never make writes less durable.
 */

import { TickwheelError } from '../errors.js';
import { describe, invalidOption } from '../validate.js';
import type { ClusterDurability } from '../protocol/model.js';

/** When a write is acknowledged: on the primary ('async'), a replica too, or fsynced on both. */
export type Durability = ClusterDurability;

/** The `durability` option: a setting, or 'auto' (the default) to choose by the replicas. */
export type DurabilityOption = Durability | 'auto';

const OPTIONS: readonly DurabilityOption[] = ['auto', 'async', 'replicated', 'fsynced'];

export function checkDurability(durability: unknown): DurabilityOption {
  if (!OPTIONS.includes(durability as DurabilityOption)) {
    throw invalidOption(
      `durability must be one of ${OPTIONS.join(', ')}, got ${describe(durability)}`,
    );
  }
  return durability as DurabilityOption;
}

/** 'replicated' or 'fsynced' where no primary has a replica: no write could be acknowledged. */
export class TickwheelNoReplicaError extends TickwheelError {
  readonly durability: Durability;
  readonly primaries: readonly string[];
  constructor(durability: Durability, primaries: readonly string[]) {
    super(
      'ERR_TICKWHEEL_NO_REPLICA',
      `durability '${durability}' needs a replica, and no primary has one ` +
        `(${primaries.join(', ')}: connected_slaves 0): use durability 'auto' (the default) or ` +
        `'async' (serve --durability auto|async) on a server without replicas, or add a ` +
        `replica (replicaof <primary host> <port> on another server)`,
    );
    this.name = 'TickwheelNoReplicaError';
    this.durability = durability;
    this.primaries = primaries;
  }
}

/** The durability a node opening with `option` keeps, and why, in words for its log. */
export function chooseDurability(
  option: DurabilityOption,
  /** Per primary (host:port, or the URL it was reached by), its replicas. */
  primaries: ReadonlyArray<{ primary: string; replicas: number }>,
): { durability: Durability; reason: string } {
  const without = primaries.filter((p) => p.replicas === 0).map((p) => p.primary);
  const replicated = without.length < primaries.length;
  if (!replicated) {
    if (option === 'auto') {
      return {
        durability: 'async',
        reason:
          `auto: no primary has a replica (${without.join(', ')}), so writes are acknowledged ` +
          'once the primary has them; a failover or a crash of the primary can lose them',
      };
    }
    if (option !== 'async') throw new TickwheelNoReplicaError(option, without);
  }
  const durability = option === 'auto' ? 'replicated' : option;
  const how = option === 'auto' ? 'auto: the primaries have replicas' : 'as set';
  if (durability === 'async' || without.length === 0) return { durability, reason: how };
  return {
    durability,
    reason:
      `${how}; ${without.join(', ')} has none now, so writes to its partitions fail ` +
      'with ERR_TICKWHEEL_NOT_DURABLE until one joins',
  };
}
