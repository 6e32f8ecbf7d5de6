/**
 * A node's fires of all its partitions, for a store that takes several partitions' fires in one
 * call (PartitionDriver.fireMany): due messages gather while earlier fires are under way and go
 * out together, each partition's fenced on its own. Each owner handles its own answer.
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
    const pending = [...batches]
      .filter(([owner]) => owner.active)
      .sort(([a], [b]) => a.partition - b.partition);
    let call: Array<[PartitionOwner, Due[]]> = [];
    let size = 0;
    for (const [owner, dues] of pending) {
      for (let from = 0; from < dues.length;) {
        const part = dues.slice(from, from + FIRE_MOST - size);
        call.push([owner, part]);
        size += part.length;
        from += part.length;
        if (size >= FIRE_MOST) {
          await this.send(call);
          call = [];
          size = 0;
        }
      }
    }
    if (call.length > 0) await this.send(call);
  }

  private async send(calls: Array<[PartitionOwner, Due[]]>): Promise<void> {
    const live = calls.filter(([owner]) => owner.active);
    if (live.length === 0) return;
    const { nodeId: node, maxClockSkewMs } = this.settings;
    try {
      const answers = await this.fireMany(
        live.map(([owner, at]) => ({
          partition: owner.partition,
          by: { node, epoch: owner.epoch },
          at,
        })),
        maxClockSkewMs,
      );
      live.forEach(([owner, at], i) => owner.fired(at, answers[i]));
    } catch (err) {
      this.settings.onError(err);
      for (const [owner, at] of live) owner.fireFailed(at);
    }
  }
}
