/**
 * MemoryStore: the Store contract without durability, for tests and for users who want a
 * delay queue with no disk at all. Everything is lost when the process ends.
 */

import { DueHeap } from '../queue/due-heap.js';
import type { MessageState } from '../queue/message.js';
import type { RecoveryReport, Store, StoredMessage } from '../queue/store.js';

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
  private readonly heap = new DueHeap<{ entry: Entry; version: number }>();
  private nextRef = 1;

  horizonEnd(until: number): number {
    return until;
  }

  async recover(): Promise<RecoveryReport> {
    return { live: 0, corrupt: [], truncatedBytes: 0, durationMs: 0 };
  }

  async lookup(id: string): Promise<StoredMessage | undefined> {
    const entry = this.entries.get(id);
    if (entry === undefined) return undefined;
    return { ...entry.state, status: entry.status };
  }

  async add(message: MessageState, inHorizon: boolean): Promise<void> {
    message.ref = this.nextRef++;
    const entry: Entry = {
      state: { ...message },
      status: 'scheduled',
      version: 0,
      handedOver: inHorizon,
    };
    this.entries.set(message.id, entry);
    if (!inHorizon) this.heap.push(message.deliverAt, { entry, version: 0 });
  }

  async move(message: MessageState, inHorizon: boolean): Promise<void> {
    let entry = this.entries.get(message.id);
    if (entry === undefined) {
      entry = { state: { ...message }, status: 'scheduled', version: 0, handedOver: inHorizon };
      this.entries.set(message.id, entry);
    }
    entry.state = { ...message, payload: entry.state.payload ?? message.payload };
    entry.status = 'scheduled';
    entry.version++;
    entry.handedOver = inHorizon;
    if (!inHorizon) this.heap.push(message.deliverAt, { entry, version: entry.version });
  }

  async finish(message: MessageState): Promise<void> {
    this.entries.delete(message.id);
  }

  async bury(message: MessageState): Promise<void> {
    const entry = this.entries.get(message.id);
    if (entry === undefined) return;
    entry.state = { ...entry.state, attempts: message.attempts, deliverAt: message.deliverAt };
    entry.status = 'dead';
    entry.version++;
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

  async payloadOf(message: MessageState): Promise<Uint8Array> {
    const payload = this.entries.get(message.id)?.state.payload;
    if (payload === undefined) throw new Error(`no payload kept for message ${message.id}`);
    return payload;
  }

  async dead(topic: string, limit: number): Promise<StoredMessage[]> {
    const dead: StoredMessage[] = [];
    for (const entry of this.entries.values()) {
      if (entry.status === 'dead' && entry.state.topic === topic) {
        dead.push({ ...entry.state, status: 'dead' });
        if (dead.length >= limit) break;
      }
    }
    return dead;
  }

  stats(): Record<string, number> {
    return { live: this.entries.size, waiting: this.heap.size };
  }

  async close(): Promise<void> {}
}
