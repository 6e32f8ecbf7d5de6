/**
 * Which durability a node keeps, decided once, when it opens (docs/cluster.md, "Durability
 * settings").
 *
 * A durability wait (`WAIT 1`, `WAITAOF 1 1`) can only succeed on a primary that has a replica.
 * On a server without one (a development box) every acknowledged write would wait out the
 * wait's timeout and then fail, so the replicas are counted at open (`connected_slaves` of
 * `INFO replication` on every primary) and:
 *
 *   'auto'                    'replicated' if any primary has a replica, 'async' if none has;
 *   'replicated', 'fsynced'   kept if any primary has a replica; refused if none has
 *                             (TickwheelNoReplicaError), with the fix in the message.
 *
 * "Any", not "every": in a Cluster that is short of one replica for a moment (a failover under
 * way, a replica restarting) a node that opens keeps the deployment's durability rather than
 * giving it up for good; the writes of the shard without a replica fail with
 * ERR_TICKWHEEL_NOT_DURABLE until it has one again, as they do on a running node.
 *
 * The choice holds until the node closes: replicas added later do not turn an 'async' node
 * into a 'replicated' one (open it again), and replicas lost later do not make a 'replicated'
 * one 'async' (its writes fail NOT_DURABLE instead of being acknowledged less durably).
 */

import { TickwheelError, TickwheelTypeError } from '../errors.js';
import { describe } from '../validate.js';
import type { Durability } from './producer.js';

/** The `durability` option: a setting, or 'auto' (the default) to choose by the replicas. */
export type DurabilityOption = Durability | 'auto';

const OPTIONS: readonly DurabilityOption[] = ['auto', 'async', 'replicated', 'fsynced'];

export function checkDurability(durability: unknown): DurabilityOption {
  if (!OPTIONS.includes(durability as DurabilityOption)) {
    throw new TickwheelTypeError(
      'ERR_TICKWHEEL_INVALID_OPTION',
      `durability must be one of ${OPTIONS.join(', ')}, got ${describe(durability)}`,
    );
  }
  return durability as DurabilityOption;
}

/** A primary and the replicas connected to it when the node opened. */
export interface PrimaryReplicas {
  /** host:port, or the URL it was reached by. */
  primary: string;
  replicas: number;
}

/**
 * A node asked for 'replicated' or 'fsynced' on servers where no primary has a replica: no write
 * could ever be acknowledged. `primaries` are the servers that were asked.
 */
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
  primaries: readonly PrimaryReplicas[],
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
    return { durability: 'async', reason: 'as set' };
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
