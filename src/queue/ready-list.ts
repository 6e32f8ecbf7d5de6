/**
 * The ready messages of one topic, oldest first: a FIFO of (message, version) pairs.
 *
 * Entries are never removed from the middle. A message whose state changes (received,
 * cancelled, moved) bumps its `version`, which makes every entry pushed before that change
 * stale; stale entries are skipped when they reach the head. So taking a message out of a
 * ready list is O(1) wherever it sits, and a list may hold more entries than current messages.
 *
 * Storage: two parallel arrays and a head index (no object per entry). The consumed front is
 * cut off in one go once it is more than 1024 entries and most of the arrays, so a pop costs
 * O(1) amortised and the arrays stay at most about twice the live length.
 *
 * Invariant: `head <= messages.length === versions.length`.
 */

import { debugAssert } from '../assert.js';

/** What a ready list needs of a message: its version, bumped on every change of state. */
export interface Versioned {
  version: number;
}

export class ReadyList<M extends Versioned> {
  private messages: M[] = [];
  private versions: number[] = [];
  private head = 0;

  push(message: M): void {
    this.messages.push(message);
    this.versions.push(message.version);
  }

  /** The first entry whose message has not changed since it was pushed, if any; kept. */
  peekCurrent(): M | undefined {
    while (this.head < this.messages.length) {
      const message = this.messages[this.head];
      if (message.version === this.versions[this.head]) return message;
      this.dropHead();
    }
    return undefined;
  }

  /** Removes the head entry. */
  dropHead(): void {
    this.head++;
    if (this.head > 1024 && this.head * 2 > this.messages.length) {
      this.messages = this.messages.slice(this.head);
      this.versions = this.versions.slice(this.head);
      this.head = 0;
    }
    debugAssert(this.head <= this.messages.length, 'a ready list dropped past its end');
  }

  /**
   * Puts messages back in front, in the order given, with their current versions (into the
   * consumed room when there is enough of it).
   */
  putBack(messages: readonly M[]): void {
    if (this.head < messages.length) {
      this.messages = [...messages, ...this.messages.slice(this.head)];
      this.versions = [...messages.map((m) => m.version), ...this.versions.slice(this.head)];
      this.head = 0;
      return;
    }
    for (let i = messages.length - 1; i >= 0; i--) {
      this.head--;
      this.messages[this.head] = messages[i];
      this.versions[this.head] = messages[i].version;
    }
  }

  /** Entries, stale ones included. */
  get length(): number {
    return this.messages.length - this.head;
  }
}
