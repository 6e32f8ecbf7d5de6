/**
 * A node's fires of all its partitions, for a store that takes several partitions' fires in one
 * call (PartitionDriver.fireMany): due messages gather while earlier fires are under way, and
 * for at least `fireIntervalMs` from one call's start to the next, and go out together, each
 * partition's fenced on its own. Each owner handles its own answer. Where the store hands fired
 * messages off, each call claims this node's waiting receives (hand-offs.ts): a claim's count
 * and bytes are shared out among the partitions in order, never more in all than it asked for.
 */

import type { Fired, HandOff, PartitionDriver } from './driver.js';
import { GatedBatches } from './gated-batches.js';
import { HAND_GRACE_MS, type Claim, type HandOffs, type HandedFrom } from './hand-offs.js';
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
    private readonly handOffs?: HandOffs,
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
    const claims = this.handOffs?.claim() ?? [];
    const hands = shareOut(
      claims,
      live.map(([, at]) => at.length),
    );
    let answers: Fired[] = [];
    try {
      answers = await this.fireMany(
        live.map(([owner, at], i) => ({
          partition: owner.partition,
          by: { node, epoch: owner.epoch },
          at,
          ...(hands[i].length > 0 ? { hand: hands[i] } : {}),
        })),
        maxClockSkewMs + fireAheadMs,
      );
      live.forEach(([owner, at], i) => owner.fired(at, answers[i], floors[i]));
    } catch (err) {
      this.settings.onError(err);
      for (const [owner, at] of live) owner.fireFailed(at);
    } finally {
      for (const claim of claims) {
        const handed: HandedFrom[] = [];
        answers.forEach((answer, i) => {
          for (const message of answer?.handed ?? []) {
            if (message.topic === claim.offer.topic) {
              const { visibilityMs } = claim.offer;
              handed.push({ partition: live[i][0].partition, message, visibilityMs });
            }
          }
        });
        claim.settle(handed);
      }
    }
  }
}

/**
 * Each claim's count shared out among the calls in order, no call's share above its number of
 * due messages; its bytes in proportion to the count.
 */
function shareOut(claims: readonly Claim[], dueCounts: readonly number[]): HandOff[][] {
  const hands: HandOff[][] = dueCounts.map(() => []);
  for (const { offer } of claims) {
    let left = offer.most;
    for (let i = 0; i < dueCounts.length && left > 0; i++) {
      const most = Math.min(left, dueCounts[i]);
      left -= most;
      const maxBytes =
        most === offer.most ? offer.maxBytes : Math.floor((offer.maxBytes * most) / offer.most);
      // The deadline starts short (hand-offs.ts, HAND_GRACE_MS).
      const visibilityMs = Math.min(offer.visibilityMs, HAND_GRACE_MS);
      if (most > 0) hands[i].push({ ...offer, most, maxBytes, visibilityMs });
    }
  }
  return hands;
}
