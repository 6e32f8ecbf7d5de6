/**
 * Exact counts of live messages, kept by both stores for dashboards: per topic, how many are
 * pending (scheduled, ready or in flight: wherever they are held) and how many are dead; and
 * the pending ones by the hour their due time falls in. Every change of a message is one O(1)
 * update here, so reading them never scans messages.
 *
 * Transitions (`hour` = the due time rounded down to a multiple of 3,600,000 ms):
 *
 *   add      pending +1, hours[hour(deliverAt)] +1
 *   move     hours[hour(previous)] -1, hours[hour(deliverAt)] +1
 *   bury     pending -1, dead +1, hours[hour(deliverAt)] -1
 *   revive   dead -1, pending +1, hours[hour(deliverAt)] +1   (a requeue: a move of a dead one)
 *   finish   pending -1 and hours[hour(deliverAt)] -1, or dead -1
 *
 * A topic with nothing pending or dead and an hour with nothing due are dropped from the maps.
 */

import type { StoreCounts } from '../queue/store.js';

export const HOUR_MS = 3_600_000;

export function hourOf(deliverAt: number): number {
  return Math.floor(deliverAt / HOUR_MS) * HOUR_MS;
}

interface TopicCount {
  pending: number;
  dead: number;
}

/** The counts as plain arrays, for the file store's snapshot. */
export interface CountEntries {
  topics: Array<[topic: string, pending: number, dead: number]>;
  hours: Array<[hour: number, count: number]>;
}

/** Hours are kept by number (small integers, which Maps handle fastest), not by start time. */
function hourNumber(deliverAt: number): number {
  return Math.floor(deliverAt / HOUR_MS);
}

export class MessageCounts {
  private readonly topics = new Map<string, TopicCount>();
  /** Hour number (deliverAt / HOUR_MS, rounded down) -> pending messages due in it. */
  private readonly hours = new Map<number, number>();

  add(topic: string, deliverAt: number): void {
    this.topic(topic).pending++;
    this.hour(hourNumber(deliverAt), 1);
  }

  move(previousDeliverAt: number, deliverAt: number): void {
    const from = hourNumber(previousDeliverAt);
    const to = hourNumber(deliverAt);
    if (from === to) return;
    this.hour(from, -1);
    this.hour(to, 1);
  }

  bury(topic: string, deliverAt: number): void {
    const count = this.topic(topic);
    count.pending--;
    count.dead++;
    this.hour(hourNumber(deliverAt), -1);
  }

  revive(topic: string, deliverAt: number): void {
    const count = this.topic(topic);
    count.dead--;
    count.pending++;
    this.hour(hourNumber(deliverAt), 1);
  }

  finish(topic: string, deliverAt: number): void {
    const count = this.topic(topic);
    count.pending--;
    this.drop(topic, count);
    this.hour(hourNumber(deliverAt), -1);
  }

  finishDead(topic: string): void {
    const count = this.topic(topic);
    count.dead--;
    this.drop(topic, count);
  }

  /** Copies of the counts. */
  read(): StoreCounts {
    const topics = new Map<string, TopicCount>();
    for (const [topic, { pending, dead }] of this.topics) topics.set(topic, { pending, dead });
    const hours = new Map<number, number>();
    for (const [hour, count] of this.hours) hours.set(hour * HOUR_MS, count);
    return { topics, hours };
  }

  entries(): CountEntries {
    return {
      topics: [...this.topics].map(([topic, { pending, dead }]) => [topic, pending, dead]),
      hours: [...this.hours].map(([hour, count]) => [hour * HOUR_MS, count]),
    };
  }

  /** Replaces the counts with those of a snapshot. */
  load(entries: CountEntries): void {
    this.topics.clear();
    this.hours.clear();
    for (const [topic, pending, dead] of entries.topics) this.topics.set(topic, { pending, dead });
    for (const [hour, count] of entries.hours) this.hours.set(hourNumber(hour), count);
  }

  private topic(topic: string): TopicCount {
    let count = this.topics.get(topic);
    if (count === undefined) this.topics.set(topic, (count = { pending: 0, dead: 0 }));
    return count;
  }

  private drop(topic: string, count: TopicCount): void {
    if (count.pending === 0 && count.dead === 0) this.topics.delete(topic);
  }

  private hour(hour: number, by: number): void {
    const count = (this.hours.get(hour) ?? 0) + by;
    if (count === 0) this.hours.delete(hour);
    else this.hours.set(hour, count);
  }
}

/**
 * Topic names read from records, one string per distinct topic: a replay of millions of
 * records makes no new string for a topic it has seen.
 */
export class TopicNames {
  private readonly byHash = new Map<number, string>();

  name(bytes: Uint8Array, start: number, length: number): string {
    let hash = 0x811c9dc5 ^ length;
    for (let i = start; i < start + length; i++) hash = Math.imul(hash ^ bytes[i], 0x01000193);
    const known = this.byHash.get(hash);
    if (known !== undefined && sameText(known, bytes, start, length)) return known;
    const name = Buffer.from(bytes.buffer, bytes.byteOffset + start, length).toString('latin1');
    if (known === undefined && this.byHash.size >= 65_536) this.byHash.clear();
    this.byHash.set(hash, name);
    return name;
  }
}

function sameText(text: string, bytes: Uint8Array, start: number, length: number): boolean {
  if (text.length !== length) return false;
  for (let i = 0; i < length; i++) if (text.charCodeAt(i) !== bytes[start + i]) return false;
  return true;
}
