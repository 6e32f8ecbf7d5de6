/**
 * Finished messages (acked or cancelled) that get() still reports, for a while.
 *
 * Two generations of at most `capacity` each: when the newer one fills up it becomes the older
 * one, and the previous older one is dropped in one go. So between `capacity` and about twice
 * that many of the latest finished ids are remembered, with no per-entry bookkeeping (no LRU
 * list) and O(1) work per finish. A message finished again (an id reused after it finished) is
 * found in the newer generation first, which shadows an older copy.
 *
 * The message objects themselves are kept, with their payload dropped, so that finishing
 * allocates nothing.
 */

import type { MessageState } from './message.js';

export interface FinishedMessage extends MessageState {
  status: 'acked' | 'cancelled';
}

export class FinishedMemory {
  private newer = new Map<string, FinishedMessage>();
  private older = new Map<string, FinishedMessage>();

  /** `capacity` 0 remembers nothing. */
  constructor(private readonly capacity: number) {}

  remember(message: MessageState, status: 'acked' | 'cancelled'): void {
    if (this.capacity === 0) return;
    const done = message as FinishedMessage;
    done.status = status;
    done.payload = undefined;
    this.newer.set(message.id, done);
    if (this.newer.size >= this.capacity) {
      this.older = this.newer;
      this.newer = new Map();
    }
  }

  get(id: string): FinishedMessage | undefined {
    return this.newer.get(id) ?? this.older.get(id);
  }
}
