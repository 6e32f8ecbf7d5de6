/**
 * Finished messages (acked or cancelled) that get() still reports, for a while.
 *
 * Two generations of at most `capacity` each: when the newer one fills up it becomes the older
 * one, and the previous older one is dropped in one go. So between `capacity` and about twice
 * that many of the latest finished ids are remembered, with no per-entry bookkeeping (no LRU
 * list) and O(1) work per finish. A message finished again (an id reused after it finished) is
 * found in the newer generation first, which shadows an older copy.
 *
 * A generation is an array in finishing order, indexed by id only when get() asks: finishing
 * is one push (a Map set by id string cost ~100 ns at 100,000 acks, on the path of every ack),
 * and get() first indexes what was finished since the last get(), so each message is indexed
 * at most once, and only while someone asks.
 *
 * The message objects themselves are kept, with their payload dropped, so that finishing
 * allocates nothing.
 */

import type { MessageState } from './message.js';

export interface FinishedMessage extends MessageState {
  status: 'acked' | 'cancelled';
}

/** One generation: finished messages in order, and an index of the first `indexed` of them. */
class Generation {
  readonly messages: FinishedMessage[] = [];
  readonly byId = new Map<string, FinishedMessage>();
  indexed = 0;

  find(id: string): FinishedMessage | undefined {
    const { messages, byId } = this;
    // Later entries overwrite earlier ones of the same id: the latest finish is found.
    for (; this.indexed < messages.length; this.indexed++) {
      const message = messages[this.indexed];
      byId.set(message.id, message);
    }
    return byId.get(id);
  }
}

export class FinishedMemory {
  private newer = new Generation();
  private older = new Generation();

  /** `capacity` 0 remembers nothing. */
  constructor(private readonly capacity: number) {}

  remember(message: MessageState, status: 'acked' | 'cancelled'): void {
    if (this.capacity === 0) return;
    const done = message as FinishedMessage;
    done.status = status;
    done.payload = undefined;
    done.payloadText = undefined;
    if (this.newer.messages.push(done) >= this.capacity) {
      this.older = this.newer;
      this.newer = new Generation();
    }
  }

  get(id: string): FinishedMessage | undefined {
    return this.newer.find(id) ?? this.older.find(id);
  }
}
