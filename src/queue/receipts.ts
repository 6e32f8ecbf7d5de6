/**
 * Receipts: the string a delivery is acknowledged with, and the table that finds its message.
 *
 * Every message in flight has a slot (a small integer, reused once freed). Its receipt is
 *
 *     prefix  slot (base 36)  '.'  counter (base 36)       e.g.  rQk3…x9  2f . 1a0c
 *
 * - `prefix` is random per process, so a receipt cannot be guessed from outside;
 * - the slot finds the message with one array index: no Map lookup by string on ack;
 * - the counter makes every receipt unique within the process, so a receipt of an earlier
 *   delivery (same message or same slot) is never mistaken for the current one: the message
 *   in the slot must hold exactly this receipt.
 *
 * No random bytes per receipt: one string concatenation. The prefix starts with a letter, as
 * base64url may start with '-' and a receipt that looks like an option is misread by command
 * lines (`tickwheel ack -x...`).
 *
 * Invariants: a message with `slot >= 0` is `slots[slot]`, and its slot is in no free list;
 * `owner(r)` is a message only if it is in flight and its `receipt === r`.
 */

import { randomBytes } from 'node:crypto';
import { debugAssert } from '../assert.js';
import { describe, TickwheelTypeError } from '../errors.js';

const receiptPrefix = `r${randomBytes(9).toString('base64url')}`;
let receiptCounter = 0;

/** What the table needs of a message. */
export interface Receivable {
  status: string;
  receipt: string | undefined;
  /** Its slot while in flight, else -1. */
  slot: number;
}

export class Receipts<M extends Receivable> {
  private readonly slots: Array<M | undefined> = [];
  private readonly free: number[] = [];
  /** `prefix slot '.'` of each slot, made once: slots are reused, and toString(36) is not cheap. */
  private readonly heads: string[] = [];

  /** Gives a message going in flight a slot and a fresh receipt (also set on the message). */
  issue(message: M): string {
    debugAssert(message.slot < 0, 'a message in flight was given a second receipt');
    const slot = this.free.pop() ?? this.slots.length;
    this.slots[slot] = message;
    message.slot = slot;
    const head = (this.heads[slot] ??= `${receiptPrefix}${slot.toString(36)}.`);
    message.receipt = head + (++receiptCounter).toString(36);
    return message.receipt;
  }

  /** Frees a message's slot, if it has one, and clears its receipt. */
  release(message: M): void {
    message.receipt = undefined;
    if (message.slot < 0) return;
    debugAssert(this.slots[message.slot] === message, 'a receipt slot held another message');
    this.slots[message.slot] = undefined;
    this.free.push(message.slot);
    message.slot = -1;
  }

  /**
   * The message in flight under this receipt, or undefined for a receipt that is stale, unknown
   * or malformed. Only a receipt that is not a string is an error.
   */
  owner(receipt: unknown): M | undefined {
    if (typeof receipt !== 'string') {
      throw new TickwheelTypeError(
        'ERR_TICKWHEEL_INVALID_MESSAGE',
        `receipt must be the string receive() returned, got ${describe(receipt)}`,
      );
    }
    // Reads the slot between the prefix and the '.' without making strings.
    let slot = 0;
    let at = receiptPrefix.length;
    for (; at < receipt.length; at++) {
      const c = receipt.charCodeAt(at);
      if (c === 46) break;
      const digit = c >= 48 && c <= 57 ? c - 48 : c >= 97 && c <= 122 ? c - 87 : -1;
      if (digit < 0 || slot > 0x3fffffff) return undefined;
      slot = slot * 36 + digit;
    }
    const message = at < receipt.length ? this.slots[slot] : undefined;
    return message !== undefined && message.status === 'inflight' && message.receipt === receipt
      ? message
      : undefined;
  }
}
