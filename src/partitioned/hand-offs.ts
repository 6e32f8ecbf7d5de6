/**
 * The receives of this node that wait for messages, which the node's own fires may hand fired
 * messages to (PartitionDriver.fireMany's `hand`): such a message goes straight in flight under
 * the receive, with no ready row and no take of its own (docs/postgres.md, "Hand-off").
 *
 * A fire claims at most the oldest waiting receive of each topic, and a receive is claimed by
 * one fire at most. A claimed receive waits for that fire's answer before it does anything
 * else, so it never gets more than it asked for, and what was handed to it is never dropped.
 */

import type { HandOff, Handed, PartitionDriver } from './driver.js';

/**
 * A hand-off's first visibility (ms), at most: a node that dies holding messages handed to it
 * ahead of their due time (which no take would have given it yet) strands them this long, not
 * for the whole visibility asked. A delivery still out halfway gets the rest in one call.
 */
export const HAND_GRACE_MS = 1_000;

/** A message handed off, with the partition it came from and the visibility its receive asked. */
export type HandedFrom = { partition: number; message: Handed; visibilityMs: number };

/** A waiting receive, open to one claim. */
export interface OpenReceive {
  readonly offer: HandOff;
  /** Set when a fire claims it: what that fire handed it, once answered. */
  handed?: Promise<HandedFrom[]>;
}

/** A receive claimed by a fire; settle() must be called once, whatever the fire's outcome. */
export interface Claim {
  readonly offer: HandOff;
  settle(handed: HandedFrom[]): void;
}

export class HandOffs {
  /** Per topic, the waiting receives not claimed yet, oldest first. */
  private readonly open = new Map<string, OpenReceive[]>();
  /**
   * Per topic, messages handed off before their due time (an owner fires ahead of it), in
   * flight and held here for the topic's next receives, in the order of their due times. A
   * receive claims no more than its count less these, so they stay within what was asked.
   */
  private readonly held = new Map<string, HandedFrom[]>();
  /** Receipt -> a delivery handed out whose deadline is still the short first one. */
  private readonly short = new Map<
    string,
    { partition: number; id: string; attempt: number; until: number }
  >();

  constructor(
    private readonly extend: PartitionDriver['extend'],
    private readonly onError: (err: unknown) => void,
    /** Wakes the receives waiting on a topic (a claimed one is among them). */
    private readonly wake: (topic: string) => void,
  ) {}

  /** A receive starts to wait. */
  add(offer: HandOff): OpenReceive {
    const entry: OpenReceive = { offer };
    if (offer.most < 1 || offer.maxBytes < 1) return entry;
    let list = this.open.get(offer.topic);
    if (list === undefined) this.open.set(offer.topic, (list = []));
    list.push(entry);
    return entry;
  }

  /** The receive stops waiting: what a fire that claimed it handed it (none if unclaimed). */
  async end(entry: OpenReceive): Promise<HandedFrom[]> {
    if (entry.handed !== undefined) return entry.handed;
    this.drop(entry);
    return [];
  }

  /** Claims the oldest waiting receive of each topic, for a fire about to go out. */
  claim(): Claim[] {
    const claims: Claim[] = [];
    for (const [topic, list] of this.open) {
      const entry = list.shift()!;
      if (list.length === 0) this.open.delete(topic);
      let resolve!: (handed: HandedFrom[]) => void;
      entry.handed = new Promise((done) => (resolve = done));
      const settle = (handed: HandedFrom[]) => {
        resolve(handed);
        if (handed.length > 0) this.wake(topic);
      };
      claims.push({ offer: entry.offer, settle });
    }
    return claims;
  }

  /** Keeps messages a fire handed to a receive, for receives of their topic to take when due. */
  keep(topic: string, handed: readonly HandedFrom[]): void {
    if (handed.length === 0) return;
    const list = this.held.get(topic) ?? [];
    list.push(...handed);
    list.sort((a, b) => a.message.deliverAt - b.message.deliverAt);
    this.held.set(topic, list);
  }

  /** How many messages of `topic` are held. */
  heldCount(topic: string): number {
    return this.held.get(topic)?.length ?? 0;
  }

  /** When the first message of `topic` held is due (Infinity: none). */
  nextDue(topic: string): number {
    return this.held.get(topic)?.[0].message.deliverAt ?? Infinity;
  }

  /** Up to `max` held messages of `topic` due by `now`, within `maxBytes` (always one if due). */
  due(topic: string, max: number, maxBytes: number, now: number): HandedFrom[] {
    const list = this.held.get(topic);
    if (list === undefined) return [];
    let n = 0;
    let bytes = 0;
    while (n < list.length && n < max && list[n].message.deliverAt <= now) {
      bytes += list[n].message.record.length;
      if (n > 0 && bytes > maxBytes) break;
      n++;
    }
    const out = list.splice(0, n);
    if (list.length === 0) this.held.delete(topic);
    return out;
  }

  /**
   * Messages handed off, now answered by a receive under these receipts: each still out
   * HAND_GRACE_MS / 2 from now is made visible again only when its visibility runs out.
   */
  handedOut(out: ReadonlyArray<{ receipt: string; from: HandedFrom; attempt: number }>): void {
    const now = Date.now();
    const receipts: string[] = [];
    for (const { receipt, from, attempt } of out) {
      if (from.visibilityMs <= HAND_GRACE_MS) continue;
      const { partition, message } = from;
      const until = now + from.visibilityMs;
      this.short.set(receipt, { partition, id: message.id, attempt, until });
      receipts.push(receipt);
    }
    if (receipts.length === 0) return;
    setTimeout(() => void this.lengthen(receipts), HAND_GRACE_MS / 2).unref();
  }

  /** A delivery acked or nacked: its deadline no longer matters. */
  settled(receipt: string): void {
    this.short.delete(receipt);
  }

  private async lengthen(receipts: readonly string[]): Promise<void> {
    const byPartition = new Map<number, Array<{ id: string; attempt: number; leftMs: number }>>();
    const now = Date.now();
    for (const receipt of receipts) {
      const d = this.short.get(receipt);
      if (d === undefined) continue;
      this.short.delete(receipt);
      let list = byPartition.get(d.partition);
      if (list === undefined) byPartition.set(d.partition, (list = []));
      list.push({ id: d.id, attempt: d.attempt, leftMs: d.until - now });
    }
    for (const [partition, deliveries] of byPartition) {
      // Failed: those still out are handed out again once the short deadline passes.
      await this.extend?.(partition, deliveries).catch((err: unknown) => this.onError(err));
    }
  }

  private drop(entry: OpenReceive): void {
    const list = this.open.get(entry.offer.topic);
    const at = list?.indexOf(entry) ?? -1;
    if (at < 0) return;
    list!.splice(at, 1);
    if (list!.length === 0) this.open.delete(entry.offer.topic);
  }
}
