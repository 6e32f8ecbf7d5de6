/** Per-id locks of the engine (turns.ts); `busy(id)` lets callers skip an uncontended lock. */

import { Turns } from './turns.js';

export class IdLocks extends Turns {
  busy(id: string): boolean {
    // (Asked on every ack: an empty map, the usual case, is not hashed into.)
    return this.tails.size !== 0 && this.tails.has(id);
  }
}
