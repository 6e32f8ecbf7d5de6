/** MemoryStore: the Store contract without durability, for tests and disk-less queues. */

import { assert } from '../assert.js';
import { DueHeap } from '../queue/due-heap.js';
import { inRange, SmallestKeys, type KeyedPart, type ListQuery } from '../queue/list.js';
import { payloadBytes, type MessageState } from '../queue/message.js';
import type {
  RecoveryReport,
  Store,
  StoreCounts,
  StoredMessage,
  StoreStats,
} from '../queue/store.js';
import type { ScheduleRecord } from '../queue/recurring.js';
import type { TopicSettings } from '../queue/topics.js';
import { MessageCounts } from './counts.js';

interface Entry {
  state: MessageState;
  status: 'scheduled' | 'dead';
  /** Bumped on every change; heap entries with an older version are stale. */
  version: number;
  /** With the queue (inside its horizon) rather than waiting in the heap. */
  handedOver: boolean;
}

export class MemoryStore implements Store {
  private readonly entries = new Map<string, Entry>();
  /** The dead entries, in the order they died (as the file store lists them). */
  private readonly buried = new Map<string, Entry>();
  private readonly heap = new DueHeap<{ entry: Entry; version: number }>();
  private nextRef = 1;
  private readonly tally = new MessageCounts();
  private topicSettings = new Map<string, TopicSettings>();
  private readonly schedules = new Map<string, ScheduleRecord>();

  async readTopicSettings(): Promise<Map<string, TopicSettings>> {
    return new Map(this.topicSettings);
  }

  async writeTopicSettings(settings: ReadonlyMap<string, TopicSettings>): Promise<void> {
    this.topicSettings = new Map(settings);
  }

  async readSchedules(): Promise<ScheduleRecord[]> {
    return [...this.schedules.values()].map((record) => structuredClone(record));
  }

  async writeSchedules(
    records: readonly ScheduleRecord[],
    deleted: readonly string[],
  ): Promise<void> {
    for (const record of records) this.schedules.set(record.name, structuredClone(record));
    for (const name of deleted) this.schedules.delete(name);
  }

  horizonEnd(until: number): number {
    return until;
  }

  async recover(): Promise<RecoveryReport> {
    return {
      live: 0,
      corrupt: [],
      truncatedBytes: 0,
      snapshot: 'none',
      replayedBytes: 0,
      durationMs: 0,
    };
  }

  async lookup(id: string): Promise<StoredMessage | undefined> {
    const entry = this.entries.get(id);
    if (entry === undefined) return undefined;
    return { ...entry.state, status: entry.status };
  }

  async add(message: MessageState, inHorizon: boolean): Promise<void> {
    message.ref = this.nextRef++;
    // A dead message with the same id is replaced (a live one never is: the queue deduplicates).
    const replaced = this.entries.get(message.id);
    if (replaced !== undefined) this.uncount(replaced);
    this.buried.delete(message.id);
    this.tally.add(message.topic, message.deliverAt);
    const entry: Entry = {
      state: { ...message, payload: payloadBytes(message), payloadText: undefined },
      status: 'scheduled',
      version: 0,
      handedOver: inHorizon,
    };
    this.entries.set(message.id, entry);
    if (!inHorizon) this.heap.push(message.deliverAt, { entry, version: 0 });
  }

  // The store's own copy says where the message was: `previousDeliverAt` is not needed here.
  async move(message: MessageState, inHorizon: boolean): Promise<void> {
    let entry = this.entries.get(message.id);
    if (entry === undefined) {
      entry = { state: { ...message }, status: 'scheduled', version: 0, handedOver: inHorizon };
      this.entries.set(message.id, entry);
      this.tally.add(message.topic, message.deliverAt);
    } else if (entry.status === 'dead') {
      this.tally.revive(entry.state.topic, message.deliverAt);
      this.buried.delete(message.id);
    } else {
      this.tally.move(entry.state.deliverAt, message.deliverAt);
    }
    entry.state = { ...message, payload: entry.state.payload ?? message.payload };
    entry.status = 'scheduled';
    entry.version++;
    entry.handedOver = inHorizon;
    if (!inHorizon) this.heap.push(message.deliverAt, { entry, version: entry.version });
  }

  async finish(message: MessageState): Promise<void> {
    const entry = this.entries.get(message.id);
    if (entry === undefined) return;
    this.uncount(entry);
    this.entries.delete(message.id);
    this.buried.delete(message.id);
  }

  async bury(message: MessageState): Promise<void> {
    const entry = this.entries.get(message.id);
    if (entry === undefined) return;
    if (entry.status !== 'dead') this.tally.bury(entry.state.topic, entry.state.deliverAt);
    entry.state = {
      ...entry.state,
      attempts: message.attempts,
      deliverAt: message.deliverAt,
      lastError: message.lastError,
    };
    entry.status = 'dead';
    entry.version++;
    this.buried.delete(message.id);
    this.buried.set(message.id, entry);
  }

  async loadUntil(until: number, onDue: (message: MessageState) => void): Promise<void> {
    while (this.heap.peekDue() < until) {
      const { entry, version } = this.heap.pop()!;
      if (entry.version !== version || entry.handedOver || entry.status !== 'scheduled') continue;
      if (this.entries.get(entry.state.id) !== entry) continue;
      entry.handedOver = true;
      onDue({ ...entry.state });
    }
  }

  async listWaiting(query: ListQuery): Promise<KeyedPart<StoredMessage>> {
    const found = new SmallestKeys<StoredMessage>(query.limit + 1);
    for (const { state, status, handedOver } of this.entries.values()) {
      if (status !== 'scheduled' || handedOver || state.topic !== query.topic) continue;
      const key = { deliverAt: state.deliverAt, seq: state.ref, id: state.id };
      if (inRange(query, key)) {
        found.push({ ...state, payload: undefined, status: 'scheduled' }, key);
      }
    }
    return found.part();
  }

  async payloadOf(message: MessageState): Promise<Uint8Array> {
    const payload = this.entries.get(message.id)?.state.payload;
    assert(payload !== undefined, () => `the memory store holds no message ${message.id}`);
    return payload;
  }

  async dead(topic: string, limit: number): Promise<StoredMessage[]> {
    const dead: StoredMessage[] = [];
    for (const entry of this.buried.values()) {
      if (entry.state.topic === topic) {
        dead.push({ ...entry.state, status: 'dead' });
        if (dead.length >= limit) break;
      }
    }
    return dead;
  }

  counts(): StoreCounts {
    return this.tally.read();
  }

  dueMinutes(): ReadonlyMap<number, number> {
    return this.tally.dueMinutes();
  }

  private uncount(entry: Entry): void {
    if (entry.status === 'dead') this.tally.finishDead(entry.state.topic);
    else this.tally.finish(entry.state.topic, entry.state.deliverAt);
  }

  stats(): StoreStats {
    return { live: this.entries.size, waiting: this.heap.size };
  }

  async close(): Promise<void> {}
}
