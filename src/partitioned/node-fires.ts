/**
 * A node's fires of all its partitions, for a store that takes several partitions' fires in one
 * call (PartitionDriver.fireMany): due messages gather while earlier fires are under way, and
 * for at least `fireIntervalMs` from one call's start to the next, and go out together, each
 * partition's fenced on its own. Each owner handles its own answer.
 */

import type { PartitionDriver } from './driver.js';
import { GatedBatches } from './gated-batches.js';
import type { Due, PartitionOwner } from './owner.js';

/** Fire calls under way at once. */
const IN_FLIGHT = 1;
/**
 * Messages a call fires at most: a burst goes out in calls of this size, one after the other,
 * so the first of it is ready as soon as its call commits rather than once the whole burst has.
 */
const FIRE_MOST = 2_000;

type FireMany = NonNullable<PartitionDriver['fireMany']>;

export class NodeFires {
  private readonly batches: GatedBatches<PartitionOwner, Due>;

  constructor(
    private readonly fireMany: FireMany,
    private readonly settings: {
      nodeId: string;
      maxClockSkewMs: number;
      fireIntervalMs: number;
      fireAheadMs: number;
      onError: (err: unknown) => void;
    },
  ) {
    this.batches = new GatedBatches(
      (batches) => this.send(batches),
      IN_FLIGHT,
      FIRE_MOST,
      settings.fireIntervalMs,
    );
  }

  add(owner: PartitionOwner, due: Due): void {
    this.batches.add(owner, due);
  }

  private async send(batches: Map<PartitionOwner, Due[]>): Promise<void> {
    // In the order of the partitions, as every call that locks several.
    const live = [...batches]
      .filter(([owner]) => owner.active)
      .sort(([a], [b]) => a.partition - b.partition);
    if (live.length === 0) return;
    const { nodeId: node, maxClockSkewMs, fireAheadMs } = this.settings;
    const floors = live.map(([owner]) => owner.seen);
    try {
      const answers = await this.fireMany(
        live.map(([owner, at]) => ({
          partition: owner.partition,
          by: { node, epoch: owner.epoch },
          at,
        })),
        maxClockSkewMs + fireAheadMs,
      );
      live.forEach(([owner, at], i) => owner.fired(at, answers[i], floors[i]));
    } catch (err) {
      this.settings.onError(err);
      for (const [owner, at] of live) owner.fireFailed(at);
    }
  }
}
