/**
 * The ready messages of one topic, oldest first: a FIFO of (message, version) pairs. Entries are
 * never removed from the middle: a change of a message's state bumps its `version`, which makes
 * its earlier entries stale, skipped when they reach the head (taking a message out is O(1)).
 *
 * Two parallel ring buffers, a power of two in size, doubled when full and never shrunk (no
 * object per entry; versions in a typed array, unscanned by the GC): arrays grown by push and
 * cut by slice cost a burst ~70 bytes of garbage a message, and a million messages due within a
 * second spent a third of their time in the scavenger.
 *
 * Invariant: `0 <= count <= messages.length === versions.length`, a power of two; the entries
 * are at `(head + i) & mask` for i < count, the other cells hold undefined.
 */

import { assert, DEBUG } from '../assert.js';

/** What a ready list needs of a message: its version, bumped on every change of state. */
export interface Versioned {
  version: number;
}

const INITIAL_CAPACITY = 16;

export class ReadyList<M extends Versioned> {
  private messages: Array<M | undefined> = new Array<M | undefined>(INITIAL_CAPACITY).fill(
    undefined,
  );
  private versions = new Float64Array(INITIAL_CAPACITY);
  private mask = INITIAL_CAPACITY - 1;
  private head = 0;
  private count = 0;

  push(message: M): void {
    if (this.count === this.messages.length) this.grow(this.count + 1);
    const at = (this.head + this.count) & this.mask;
    this.messages[at] = message;
    this.versions[at] = message.version;
    this.count++;
  }

  /** The first entry whose message has not changed since it was pushed, if any; kept. */
  peekCurrent(): M | undefined {
    while (this.count > 0) {
      const message = this.messages[this.head] as M;
      if (message.version === this.versions[this.head]) return message;
      this.dropHead();
    }
    return undefined;
  }

  dropHead(): void {
    if (DEBUG) assert(this.count > 0, 'a ready list dropped past its end');
    this.messages[this.head] = undefined;
    this.head = (this.head + 1) & this.mask;
    this.count--;
  }

  /** Puts messages back in front, in the order given, with their current versions. */
  putBack(messages: readonly M[]): void {
    this.reserve(messages.length);
    for (let i = messages.length - 1; i >= 0; i--) {
      this.head = (this.head - 1) & this.mask;
      this.messages[this.head] = messages[i];
      this.versions[this.head] = messages[i].version;
      this.count++;
    }
  }

  /** Entries, stale ones included. */
  get length(): number {
    return this.count;
  }

  get capacity(): number {
    return this.messages.length;
  }

  /** No room for another entry: the next push grows the buffers. */
  get full(): boolean {
    return this.count === this.messages.length;
  }

  /**
   * Makes room for `more` entries at once: a burst of a hundred thousand messages pushed one by
   * one grew the buffers thirteen times from 16, copying each time (~5 ms of a 100k burst).
   */
  reserve(more: number): void {
    if (this.count + more > this.messages.length) this.grow(this.count + more);
  }

  /** Doubles the buffers until `needed` entries fit; the entries move to the front, in order. */
  private grow(needed: number): void {
    let capacity = this.messages.length * 2;
    while (capacity < needed) capacity *= 2;
    const messages = new Array<M | undefined>(capacity).fill(undefined);
    const versions = new Float64Array(capacity);
    for (let i = 0; i < this.count; i++) {
      const at = (this.head + i) & this.mask;
      messages[i] = this.messages[at];
      versions[i] = this.versions[at];
    }
    this.messages = messages;
    this.versions = versions;
    this.mask = capacity - 1;
    this.head = 0;
  }
}
