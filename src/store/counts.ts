/**
 * Exact counts of live messages for dashboards, kept by both stores: per topic, pending
 * (wherever held) and dead, and pending ones by the minute they are due. Each change is one O(1)
 * update; a topic with nothing pending or dead and a minute with nothing due leave the maps.
 */

import type { StoreCounts } from '../queue/store.js';

const HOUR_MS = 3_600_000;
const MINUTE_MS = 60_000;

/** Minutes are kept by number (small integers, which Maps handle fastest), not by start time. */
export function minuteNumber(deliverAt: number): number {
  return Math.floor(deliverAt / MINUTE_MS);
}

interface TopicCount {
  pending: number;
  dead: number;
}

/** The counts as arrays for a snapshot, minutes and hours by start (epoch ms; hours summed). */
export interface CountEntries {
  topics: Array<[topic: string, pending: number, dead: number]>;
  minutes: Array<[minute: number, count: number]>;
  hours: Array<[hour: number, count: number]>;
}

export class MessageCounts {
  private readonly topics = new Map<string, TopicCount>();
  /** Minute number (minuteNumber(deliverAt)) -> pending messages due in it. */
  private readonly minutes = new Map<number, number>();

  add(topic: string, deliverAt: number): void {
    this.topic(topic).pending++;
    this.minute(minuteNumber(deliverAt), 1);
  }

  move(previousDeliverAt: number, deliverAt: number): void {
    const from = minuteNumber(previousDeliverAt);
    const to = minuteNumber(deliverAt);
    if (from === to) return;
    this.minute(from, -1);
    this.minute(to, 1);
  }

  bury(topic: string, deliverAt: number): void {
    const count = this.topic(topic);
    count.pending--;
    count.dead++;
    this.minute(minuteNumber(deliverAt), -1);
  }

  revive(topic: string, deliverAt: number): void {
    const count = this.topic(topic);
    count.dead--;
    count.pending++;
    this.minute(minuteNumber(deliverAt), 1);
  }

  /** True when that was the topic's last live message (it has none pending or dead now). */
  finish(topic: string, deliverAt: number): boolean {
    const count = this.topic(topic);
    count.pending--;
    this.minute(minuteNumber(deliverAt), -1);
    return this.drop(topic, count);
  }

  /** As finish(), of a dead message. */
  finishDead(topic: string): boolean {
    const count = this.topic(topic);
    count.dead--;
    return this.drop(topic, count);
  }

  /** The topics' map itself, not a copy (see Store.counts). */
  read(): StoreCounts {
    return { topics: this.topics };
  }

  /** The minutes' map itself, not a copy (see Store.dueMinutes). */
  dueMinutes(): ReadonlyMap<number, number> {
    return this.minutes;
  }

  entries(): CountEntries {
    const hours = new Map<number, number>();
    for (const [minute, count] of this.minutes) {
      const hour = Math.floor((minute * MINUTE_MS) / HOUR_MS) * HOUR_MS;
      hours.set(hour, (hours.get(hour) ?? 0) + count);
    }
    return {
      topics: [...this.topics].map(([topic, { pending, dead }]) => [topic, pending, dead]),
      minutes: [...this.minutes].map(([minute, count]) => [minute * MINUTE_MS, count]),
      hours: [...hours],
    };
  }

  /** Replaces the counts with those of a snapshot. */
  load(entries: Pick<CountEntries, 'topics' | 'minutes'>): void {
    this.topics.clear();
    this.minutes.clear();
    for (const [topic, pending, dead] of entries.topics) this.topics.set(topic, { pending, dead });
    for (const [minute, count] of entries.minutes) this.minutes.set(minuteNumber(minute), count);
  }

  private topic(topic: string): TopicCount {
    let count = this.topics.get(topic);
    if (count === undefined) this.topics.set(topic, (count = { pending: 0, dead: 0 }));
    return count;
  }

  private drop(topic: string, count: TopicCount): boolean {
    if (count.pending !== 0 || count.dead !== 0) return false;
    this.topics.delete(topic);
    return true;
  }

  private minute(minute: number, by: number): void {
    const count = (this.minutes.get(minute) ?? 0) + by;
    if (count === 0) this.minutes.delete(minute);
    else this.minutes.set(minute, count);
  }
}

/**
 * Topic names read from records: one string per distinct topic, however many records. A topic
 * whose last message finished is forgotten (forget()), so the names kept are about those with
 * live messages; at most 65,536 whatever happens.
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

  /** A name read by name() (topic names are ASCII: one byte a character), kept no longer. */
  forget(name: string): void {
    let hash = 0x811c9dc5 ^ name.length;
    for (let i = 0; i < name.length; i++) hash = Math.imul(hash ^ name.charCodeAt(i), 0x01000193);
    if (this.byHash.get(hash) === name) this.byHash.delete(hash);
  }
}

function sameText(text: string, bytes: Uint8Array, start: number, length: number): boolean {
  if (text.length !== length) return false;
  for (let i = 0; i < length; i++) if (text.charCodeAt(i) !== bytes[start + i]) return false;
  return true;
}
