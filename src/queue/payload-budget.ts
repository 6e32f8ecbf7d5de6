/**
 * The payload bytes the near horizon holds, against payloadMemoryBytes. A message beyond it
 * keeps only its place in the store, which reads its payload back when it is received.
 */

import { heldPayload, type MessageState } from './message.js';

export class PayloadBudget {
  held = 0;

  constructor(readonly limit: number) {}

  /** Whether `bytes` more would fit now (nothing is counted). */
  fits(bytes: number): boolean {
    return this.held + bytes <= this.limit;
  }

  /** Counts in a message's payload if it fits, else drops it; the bytes to give back with free(). */
  admit(message: MessageState): number {
    const held = heldPayload(message);
    if (held === undefined) return 0;
    // Text by its length (1 or 2 bytes a unit in V8): measuring UTF-8 would cost each message.
    const bytes = typeof held === 'string' ? held.length : held.byteLength;
    if (this.fits(bytes)) {
      this.held += bytes;
      return bytes;
    }
    message.payload = undefined;
    message.payloadText = undefined;
    return 0;
  }

  free(bytes: number): void {
    this.held -= bytes;
  }
}
