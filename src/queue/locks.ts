/**
 * Per-id locks of the embedded engine: operations on one message id run one after another, in
 * call order (turns.ts). `busy(id)` is false for an id nothing is running on: callers use that
 * to skip the lock (and its promises) on the common, uncontended path.
 */

import { Turns } from './turns.js';

export class IdLocks extends Turns {
  /** True while an operation queued on `id` has not settled. */
  busy(id: string): boolean {
    // (Asked on every ack: an empty map, the usual case, is not hashed into.)
    return this.tails.size !== 0 && this.tails.has(id);
  }
}
