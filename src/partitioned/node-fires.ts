/**
 * A node's fires of all its partitions, for a store that takes several partitions' fires in one
 * call (PartitionDriver.fireMany): due messages gather while earlier fires are under way and go
 * out together, each partition's fenced on its own. Each owner handles its own answer.
 */

import type { Owner, PartitionDriver } from './driver.js';
import { GatedBatches } from './gated-batches.js';
import type { Due, PartitionOwner } from './owner.js';

/** Fire calls under way at once. */
const IN_FLIGHT = 1;

type FireMany = NonNullable<PartitionDriver['fireMany']>;

export class NodeFires {
  private readonly batches = new GatedBatches<PartitionOwner, Due>(
    (batches) => this.flush(batches),
    IN_FLIGHT,
  );

  constructor(
    private readonly fireMany: FireMany,
    private readonly settings: {
      nodeId: string;
      maxClockSkewMs: number;
      onError: (err: unknown) => void;
    },
  ) {}

  add(owner: PartitionOwner, due: Due): void {
    this.batches.add(owner, due);
  }

  private async flush(batches: Map<PartitionOwner, Due[]>): Promise<void> {
    // In the order of the partitions, as every call that locks several.
    const calls = [...batches]
      .filter(([owner]) => owner.active)
      .sort(([a], [b]) => a.partition - b.partition);
    if (calls.length === 0) return;
    const by = (owner: PartitionOwner): Owner => ({
      node: this.settings.nodeId,
      epoch: owner.epoch,
    });
    try {
      const answers = await this.fireMany(
        calls.map(([owner, at]) => ({ partition: owner.partition, by: by(owner), at })),
        this.settings.maxClockSkewMs,
      );
      calls.forEach(([owner, at], i) => owner.fired(at, answers[i]));
    } catch (err) {
      this.settings.onError(err);
      for (const [owner, at] of calls) owner.fireFailed(at);
    }
  }
}
