/**
 * Payloads decoded before a burst comes due.
 *
 * A delay queue knows its future: a burst of messages due in the same millisecond (a campaign
 * at 09:00:00, a batch of retries) sits in memory for seconds before it is due, and then has to
 * be delivered all at once, one message after another. Parsing a JSON payload is the largest
 * single cost of a delivery (~300 ns for a 60-byte object here, a third of the work between
 * the wheel and a handler), and it does not depend on when it is done. So the messages of a
 * dense burst have their payloads parsed ahead, in small steps while the queue is otherwise
 * idle, and a delivery hands over the object parsed for it instead of parsing then.
 *
 * What is decoded ahead:
 *   - held messages with a JSON payload in memory, still scheduled, due in the same millisecond
 *     as at least DENSE_PER_MS other scheduled ones (a trickle of messages is delivered as soon
 *     as it is due anyway: parsing it earlier would only keep the object longer);
 *   - from AHEAD_MS before the start of their second of due time (a bucket: BUCKET_MS), or at
 *     once when they are held later than that; at most MAX_PER_BUCKET of a bucket, so that the
 *     parsed objects waiting in memory stay bounded (~20 MB for small payloads).
 *
 * Work: a bucket's messages are noted in an array when they are armed (one push each); from
 * the bucket's opening, steps of at most STEP_BUDGET_MS (measured on the real clock, not the
 * queue's) run one per tick of the queue's wheel, so I/O and timers keep their turns, and only
 * while no ready message waits for a consumer: decoding ahead uses idle time, it does not
 * compete with deliveries.
 *
 * Semantics do not change: a message's payload never changes while it is held, a parsed object
 * is handed to one delivery only (the next delivery parses its own), and it is dropped when the
 * message leaves memory. A message noted twice (moved within its second) is decoded once; one
 * that moved to another second, was received, cancelled or released is skipped.
 */

import { performance as realClock } from 'node:perf_hooks';
import type { TimerHandle, TimerWheel } from '../timer/index.js';
import { decodePayload, heldPayload, PAYLOAD_JSON, type MessageState } from './message.js';

/** A second of due time per bucket. */
const BUCKET_MS = 1000;
/** A bucket opens this long before its first millisecond. */
const AHEAD_MS = 1000;
/** Scheduled messages due in one millisecond, at least, for them to be decoded ahead. */
export const DENSE_PER_MS = 256;
/** Messages of one bucket noted for decoding, at most. */
const MAX_PER_BUCKET = 262_144;
/** Work of one step, at most (real milliseconds); the clock is read every 64 messages. */
const STEP_BUDGET_MS = 0.5;

/**
 * While ready messages wait for consumers, steps wait this long and look again: the consumers
 * are behind, and decoding ahead would take CPU from them only to keep the parsed objects
 * longer (long enough to be promoted out of the young generation: more garbage collection).
 */
const BUSY_RETRY_MS = 10;

/** The value of `decoded` when nothing is decoded ahead (a payload may be null or false). */
export const UNDECODED: unique symbol = Symbol('undecoded');

/** What this reads and writes of a held message. */
export interface AheadMessage extends MessageState {
  status: string;
  held: boolean;
  /** Its payload parsed ahead for its next delivery, or UNDECODED. */
  decoded: unknown;
}

interface Bucket {
  readonly key: number;
  /** Noted messages; `next` is the first not looked at yet. */
  messages: AheadMessage[];
  next: number;
  /** Its opening time has come: what is noted is decoded as soon as steps get to it. */
  open: boolean;
  /** In `work`. */
  queued: boolean;
}

/** The payload for a delivery: the one decoded ahead (handed over once), or decoded now. */
export function deliveredPayload(message: AheadMessage, held: Uint8Array | string): unknown {
  const decoded = message.decoded;
  if (decoded === UNDECODED) return decodePayload(message.payloadKind, held);
  message.decoded = UNDECODED;
  return decoded;
}

export class DecodeAhead {
  private readonly buckets = new Map<number, Bucket>();
  /** The bucket noted into last (a burst is scheduled in a row). */
  private last: Bucket | undefined;
  /** Open buckets with messages not looked at, oldest first. */
  private readonly work: Bucket[] = [];
  private stepTimer: TimerHandle | undefined;

  /**
   * `scheduledAt(deliverAt)`: how many held messages are scheduled for that millisecond.
   * `backlogged()`: ready messages wait for consumers (then no step runs: see BUSY_RETRY_MS).
   */
  constructor(
    private readonly wheel: Pick<TimerWheel<unknown>, 'setTimeout'>,
    private readonly now: () => number,
    private readonly scheduledAt: (deliverAt: number) => number,
    private readonly backlogged: () => boolean,
  ) {}

  /** A held message got its due timer. */
  note(message: AheadMessage): void {
    if (message.payloadKind !== PAYLOAD_JSON) return;
    const key = Math.floor(message.deliverAt / BUCKET_MS);
    let bucket = this.last;
    if (bucket === undefined || bucket.key !== key) {
      bucket = this.buckets.get(key) ?? this.newBucket(key);
      this.last = bucket;
    }
    if (bucket.messages.length - bucket.next >= MAX_PER_BUCKET) return;
    bucket.messages.push(message);
    if (bucket.open && !bucket.queued) this.queue(bucket);
  }

  private newBucket(key: number): Bucket {
    const now = this.now();
    // Buckets whose second has passed are done with: nothing noted later is due in them. (A
    // bucket is made at most once a second of due time, and the map holds one per second of
    // the horizon at most: walking it is cheap.)
    const past = Math.floor(now / BUCKET_MS);
    for (const [old, each] of this.buckets) {
      if (old < past && !each.queued) this.buckets.delete(old);
    }
    const bucket: Bucket = { key, messages: [], next: 0, open: false, queued: false };
    this.buckets.set(key, bucket);
    const wait = key * BUCKET_MS - AHEAD_MS - now;
    if (wait <= 0) bucket.open = true;
    else this.wheel.setTimeout(() => this.opened(bucket), wait);
    return bucket;
  }

  private opened(bucket: Bucket): void {
    bucket.open = true;
    if (bucket.next < bucket.messages.length) this.queue(bucket);
  }

  private queue(bucket: Bucket): void {
    bucket.queued = true;
    this.work.push(bucket);
    this.stepTimer ??= this.wheel.setTimeout(this.step, 0);
  }

  /** Decodes what is worth it for at most STEP_BUDGET_MS, then leaves the rest for a tick. */
  private readonly step = (): void => {
    this.stepTimer = undefined;
    if (this.backlogged()) {
      this.stepTimer = this.wheel.setTimeout(this.step, BUSY_RETRY_MS);
      return;
    }
    const until = realClock.now() + STEP_BUDGET_MS;
    let looked = 0;
    let countMs = Number.NaN;
    let count = 0;
    while (this.work.length > 0) {
      const bucket = this.work[0];
      const messages = bucket.messages;
      while (bucket.next < messages.length) {
        const message = messages[bucket.next];
        messages[bucket.next++] = undefined as unknown as AheadMessage;
        if (
          message.decoded === UNDECODED &&
          message.held &&
          message.status === 'scheduled' &&
          Math.floor(message.deliverAt / BUCKET_MS) === bucket.key
        ) {
          if (message.deliverAt !== countMs) {
            countMs = message.deliverAt;
            count = this.scheduledAt(countMs);
          }
          const held = heldPayload(message);
          if (count >= DENSE_PER_MS && held !== undefined) {
            try {
              message.decoded = decodePayload(message.payloadKind, held);
            } catch {
              // Left for the delivery, which reports it as it always would.
            }
          }
        }
        if ((++looked & 63) === 0 && realClock.now() >= until) {
          this.stepTimer = this.wheel.setTimeout(this.step, 0);
          return;
        }
      }
      bucket.messages = [];
      bucket.next = 0;
      bucket.queued = false;
      this.work.shift();
    }
  };
}
