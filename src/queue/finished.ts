/**
 * Finished messages that get() still reports: two generations of at most `capacity`, the older
 * dropped whole when the newer fills, so O(1) work per finish. A generation is indexed by id
 * only when get() asks (a Map set would cost every ack ~100 ns).
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
