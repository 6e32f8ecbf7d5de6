/**
 * A message of the near horizon (near.ts) and what it hangs on: the visibility timeout of one
 * take (Lease), the timer of a dense millisecond (DueGroup), and the held counts stats() reads.
 * Every NearMessage is made by nearMessage(), so that all have one hidden class.
 */

import { heldPayload, storedBytes, type MessageState } from './message.js';
import type { PayloadBudget } from './payload-budget.js';
import { UNDECODED } from './decode-ahead.js';

export const MINUTE_MS = 60_000;

export interface NearMessage extends MessageState {
  status: 'scheduled' | 'ready' | 'inflight';
  /**
   * Its due timer on the wheel while scheduled alone, else undefined. Not 0: a field that holds
   * only numbers, one of them a double (a handle), keeps a boxed double in every message, and
   * most messages of a busy millisecond have no timer of their own (DueGroup).
   */
  timer: number | undefined;
  /** Its visibility timeout while in flight (shared with those taken with it), else undefined. */
  lease: Lease | undefined;
  /** Its receipt's counter while in flight (receipts.ts), else 0. */
  receiptNo: number;
  /** In flight with its ack put off by consume() (the chunk it waits in, deliveries.ts). */
  pendingAck: object | undefined;
  /** Bumped on every change of state, so stale entries in ready lists are skipped. */
  version: number;
  /** In memory (cheaper to test than a lookup by id). */
  held: boolean;
  slot: number;
  tally: HeldTally | undefined;
  /** Its payload parsed ahead of a dense burst (decode-ahead.ts), or UNDECODED. */
  decoded: unknown;
  /** The payload bytes it counts against the payload budget while held (payload-budget.ts). */
  budgeted: number;
}

/** Whether a message the queue holds is being delivered: in flight, its handler not done. */
export function delivering(message: MessageState): boolean {
  const near = message as NearMessage;
  return near.status === 'inflight' && near.pendingAck === undefined;
}

/** The visibility timeout of the messages one take() put in flight: one wheel timer for all. */
export class Lease {
  /** Its timer on the wheel; 0 once it fired or was cleared. */
  timer = 0;
  /**
   * The arrays take() returned under it, in take order, and how many messages they hold;
   * compacted once most have left, so acked payloads are not kept while one message is slow.
   */
  takes: NearMessage[][] = [];
  entries = 0;
  /** Messages of it still in flight (those that left have another lease or none). */
  live = 0;
  /** When a put-off ack of its messages must be applied: well before the visibility timeout. */
  ackBy = Infinity;

  /** `expiresAt`: its deadline, a whole millisecond on the queue's clock. */
  constructor(readonly expiresAt: number) {}

  /**
   * Its messages still under it, each once, in the order of their latest take (one taken again
   * within the same millisecond rejoined the lease, and is in `takes` twice).
   */
  members(): NearMessage[] {
    const members: NearMessage[] = [];
    const seen = new Set<NearMessage>();
    for (let t = this.takes.length - 1; t >= 0; t--) {
      const taken = this.takes[t];
      for (let i = taken.length - 1; i >= 0; i--) {
        const message = taken[i];
        if (message.lease !== this || seen.has(message)) continue;
        seen.add(message);
        members.push(message);
      }
    }
    return members.reverse();
  }
}

/**
 * The messages of a busy millisecond (NearHorizon.groupFrom or more), each with its version when
 * it joined (skipped if changed since): one wheel timer instead of one each (~100 ns a message).
 */
export class DueGroup {
  messages: NearMessage[] = [];
  versions: number[] = [];
  constructor(readonly deliverAt: number) {}

  /** Drops stale entries, in order; near.ts calls it so moved messages do not pile up. */
  compact(): void {
    let kept = 0;
    for (let i = 0; i < this.messages.length; i++) {
      const message = this.messages[i];
      if (message.version !== this.versions[i]) continue;
      this.messages[kept] = message;
      this.versions[kept++] = this.versions[i];
    }
    this.messages.length = kept;
    this.versions.length = kept;
  }
}

export interface HeldTally {
  ready: number;
  inflight: number;
  /** Held and scheduled (bounds what a burst of the topic can still make ready). */
  scheduled: number;
  /** The look at put-off acks (deliveries.ts) during which a receive last took from the topic. */
  receivedInLook: number;
}

/** The counts of held messages, read by stats() and dueHistogram() (insights.ts). */
export interface HeldCounts {
  readonly size: number;
  readonly tallies: ReadonlyMap<string, HeldTally>;
  /** Minute number (floor(deliverAt / MINUTE_MS)) -> held messages due in it. */
  readonly minutes: ReadonlyMap<number, number>;
  readonly due: DueCounts;
  readonly payloads: PayloadBudget;
}

/** `state` in the near horizon's shape (every field set at once), without its payload text. */
export function nearMessage(state: MessageState): NearMessage {
  return {
    id: state.id,
    topic: state.topic,
    deliverAt: state.deliverAt,
    attempts: state.attempts,
    maxAttempts: state.maxAttempts,
    backoff: state.backoff,
    payloadKind: state.payloadKind,
    payload: state.payload,
    payloadText: undefined,
    ref: state.ref,
    handOutRef: undefined, // (see MessageState.handOutRef)
    lastError: state.lastError,
    trace: state.trace,
    status: 'scheduled',
    timer: undefined,
    lease: undefined,
    receiptNo: 0,
    pendingAck: undefined,
    version: 0,
    held: false,
    slot: -1,
    tally: undefined,
    decoded: UNDECODED,
    budgeted: 0,
  };
}

/** Bytes of a message's payload held in memory, as stored (0 when it is only in the store). */
export function heldBytes(message: NearMessage): number {
  const held = heldPayload(message);
  return held === undefined ? 0 : storedBytes(held);
}

/**
 * Scheduled messages by due time (ms from `base`: small integer keys). Changes of one key in a
 * row add up in `delta` before the map is touched: a burst fires thousands of messages of one
 * due ms, and a Map update each cost ~80 ns.
 */
export class DueCounts {
  private readonly counts = new Map<number, number>();
  private key = Number.NaN;
  private delta = 0;

  constructor(readonly base: number) {}

  at(deliverAt: number): number {
    const key = deliverAt - this.base;
    return (this.counts.get(key) ?? 0) + (key === this.key ? this.delta : 0);
  }

  add(deliverAt: number, by: number): void {
    const key = deliverAt - this.base;
    if (key !== this.key) {
      this.settle();
      this.key = key;
    }
    this.delta += by;
  }

  /** The counts by key (ms from `base`), every change made. */
  settled(): ReadonlyMap<number, number> {
    this.settle();
    return this.counts;
  }

  private settle(): void {
    if (this.delta !== 0) bump(this.counts, this.key, this.delta);
    this.delta = 0;
    this.key = Number.NaN;
  }
}

/** Adds `by` to a count in a map of counts, dropping it at 0. */
export function bump(counts: Map<number, number>, key: number, by: number): void {
  const count = (counts.get(key) ?? 0) + by;
  if (count === 0) counts.delete(key);
  else counts.set(key, count);
}
