/**
 * Receipts: the string a delivery is acknowledged with, and the table that finds its message.
 * Every message in flight has a slot (a small integer, reused once freed). Its receipt is
 *
 *     prefix  slot (base 36)  '.'  counter (base 36)       e.g.  rQk3…x9  2f . 1a0c
 *
 * The prefix is random per process (receipts cannot be guessed) and starts with a letter (one
 * starting with '-' is misread by command lines); the slot finds the message with one array
 * index; the counter makes every receipt unique in the process, so an earlier delivery's is never
 * taken for the current one. A message keeps only its counter (`receiptNo`): a million receipt
 * strings kept on messages whose acks were put off cost the scavenger ~150 MB of promotion.
 *
 * Invariants: a message with `slot >= 0` is `slots[slot]`, and its slot is in no free list;
 * `owner(r)` is a message only if it is in flight and `receiptOf(message) === r`.
 */

import { randomBytes } from 'node:crypto';
import { assert, DEBUG } from '../assert.js';
import { base36 } from './message.js';

const receiptPrefix = `r${randomBytes(9).toString('base64url')}`;
let receiptCounter = 0;

/** What the table needs of a message. */
export interface Receivable {
  status: string;
  /** Its receipt's counter while in flight, else 0. */
  receiptNo: number;
  /** Its slot while in flight, else -1. */
  slot: number;
}

/** Slots whose receipt head is made once and kept. */
const HEAD_CACHE = 8192;

function headOf(slot: number): string {
  return `${receiptPrefix}${slot.toString(36)}.`;
}

export class Receipts<M extends Receivable> {
  private readonly slots: Array<M | undefined> = [];
  private readonly free: number[] = [];
  /**
   * `prefix slot '.'` of the first HEAD_CACHE slots, made once (toString(36) is not cheap); slots
   * past those (a million in flight in a burst) make theirs each time rather than keep them.
   */
  private readonly heads: string[] = [];

  /** Gives a message going in flight a slot and a fresh receipt counter. */
  issue(message: M): void {
    if (DEBUG) assert(message.slot < 0, 'a message in flight was given a second receipt');
    const slot = this.free.pop() ?? this.slots.length;
    this.slots[slot] = message;
    message.slot = slot;
    if (slot < HEAD_CACHE) this.heads[slot] ??= headOf(slot);
    message.receiptNo = ++receiptCounter;
  }

  receiptOf(message: M): string {
    if (DEBUG) assert(message.slot >= 0, 'a receipt was asked of a message not in flight');
    const slot = message.slot;
    return (slot < HEAD_CACHE ? this.heads[slot] : headOf(slot)) + message.receiptNo.toString(36);
  }

  /** The messages that hold a slot (those in flight). */
  holders(): M[] {
    return this.slots.filter((message): message is M => message !== undefined);
  }

  /** Frees a message's slot, if it has one, and clears its receipt. */
  release(message: M): void {
    message.receiptNo = 0;
    if (message.slot < 0) return;
    if (DEBUG) assert(this.slots[message.slot] === message, 'a receipt slot held another message');
    this.slots[message.slot] = undefined;
    this.free.push(message.slot);
    message.slot = -1;
  }

  /** The message in flight under this receipt; undefined if stale, unknown or malformed. */
  owner(receipt: string): M | undefined {
    // Reads the slot between the prefix and the '.', and the counter after it, without making
    // strings. Only the form receiptOf() makes is taken: no leading zeros, nothing after.
    if (!receipt.startsWith(receiptPrefix)) return undefined;
    const dot = receipt.indexOf('.', receiptPrefix.length);
    if (dot < 0) return undefined;
    const slot = base36(receipt, receiptPrefix.length, dot);
    const counter = base36(receipt, dot + 1, receipt.length);
    if (slot < 0 || counter <= 0) return undefined;
    const message = this.slots[slot];
    return message !== undefined && message.status === 'inflight' && message.receiptNo === counter
      ? message
      : undefined;
  }
}
