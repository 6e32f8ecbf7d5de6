/**
 * Payloads of a dense burst parsed before it comes due (docs/storage.md, "Dense bursts are
 * decoded ahead"): parsing JSON is a third of a delivery's work. near.ts notes a dense
 * millisecond's messages into a bucket per second of due time, opened AHEAD_MS before it; open
 * buckets are decoded STEP_BUDGET_MS a turn (Node's own setImmediate: fake timers must not stall
 * it), only while consumers are not behind. A parsed object goes to one delivery only.
 */

import { performance as realClock } from 'node:perf_hooks';
import {
  clearTimeout as realClearTimeout,
  setImmediate as realSetImmediate,
  setTimeout as realSetTimeout,
} from 'node:timers';
import type { TimerHandle, TimerWheel } from '../timer/index.js';
import { decodePayload, heldPayload, PAYLOAD_JSON, type MessageState } from './message.js';

const BUCKET_MS = 1000;
/** A bucket opens this long before its first millisecond. */
const AHEAD_MS = 1000;
/**
 * Messages due in one millisecond for it to count as dense (they share one due timer). A
 * steady stream gains nothing: objects parsed ahead got promoted out of the young generation.
 */
export const DENSE_PER_MS = 2048;
/** Notes of one second of due time, at most (8 bytes each). */
const MAX_NOTED = 262_144;
/** Payload text held parsed ahead at a time, at most (UTF-16 units of the JSON text). */
export const MAX_DECODED_CHARS = 16 * 1024 * 1024;
/** Larger payloads are parsed at delivery: one would take a step's whole budget. */
export const MAX_PAYLOAD_CHARS = 4096;
/** Work of one step, at most (real milliseconds). */
const STEP_BUDGET_MS = 0.5;
/** While ready messages wait for consumers, steps look again this much later. */
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
  /** Notes; `next` is the first not looked at yet. */
  messages: AheadMessage[];
  next: number;
  /** Its opening time has come: its notes are decoded as soon as steps get to them. */
  open: boolean;
  queued: boolean;
}

function sizeOf(held: Uint8Array | string): number {
  return typeof held === 'string' ? held.length : held.byteLength;
}

export class DecodeAhead {
  private readonly buckets = new Map<number, Bucket>();
  /** The bucket noted into last (a burst is scheduled in a row). */
  private last: Bucket | undefined;
  /** Open buckets with notes not looked at, oldest first. */
  private readonly work: Bucket[] = [];
  private noted = 0;
  /** The second of the clock dropPast() last looked at. */
  private droppedBefore = -Infinity;
  private decodedChars = 0;
  /** The wheel timer that opens the earliest closed bucket, and that bucket's key. */
  private opener: TimerHandle | undefined;
  private openerKey = Infinity;
  private stepQueued = false;
  private busyTimer: ReturnType<typeof realSetTimeout> | undefined;

  /** `backlogged()`: consumers are behind (ready messages wait for them). */
  constructor(
    private readonly wheel: Pick<TimerWheel<unknown>, 'setTimeout' | 'clearTimeout'>,
    private readonly now: () => number,
    private readonly backlogged: () => boolean,
  ) {}

  /** A held message joined a dense millisecond's due group. */
  note(message: AheadMessage): void {
    if (message.payloadKind !== PAYLOAD_JSON) return;
    const held = heldPayload(message);
    if (held === undefined || sizeOf(held) > MAX_PAYLOAD_CHARS) return;
    const key = Math.floor(message.deliverAt / BUCKET_MS);
    let bucket = this.last;
    if (bucket === undefined || bucket.key !== key) {
      bucket = this.buckets.get(key) ?? this.newBucket(key);
      this.last = bucket;
    }
    if (bucket.messages.length - bucket.next >= MAX_NOTED) return;
    bucket.messages.push(message);
    this.noted++;
    if (bucket.open && !bucket.queued) this.queue(bucket);
  }

  /** The payload for a delivery: the one decoded ahead (handed over once), or decoded now. */
  payloadFor(message: AheadMessage, held: Uint8Array | string): unknown {
    const decoded = message.decoded;
    if (decoded === UNDECODED) return decodePayload(message.payloadKind, held);
    message.decoded = UNDECODED;
    this.decodedChars -= sizeOf(held);
    return decoded;
  }

  /** A message leaves memory: what was parsed for it goes. */
  forget(message: AheadMessage): void {
    if (message.decoded === UNDECODED) return;
    message.decoded = UNDECODED;
    const held = heldPayload(message);
    if (held !== undefined) this.decodedChars -= sizeOf(held);
  }

  stop(): void {
    if (this.busyTimer !== undefined) realClearTimeout(this.busyTimer);
    this.busyTimer = undefined;
    this.buckets.clear();
    this.work.length = 0;
    this.noted = 0;
    this.last = undefined;
  }

  private newBucket(key: number): Bucket {
    const now = this.now();
    // At most one bucket per second of the horizon: walking them once a second is cheap.
    this.dropPast(now);
    const bucket: Bucket = { key, messages: [], next: 0, open: false, queued: false };
    this.buckets.set(key, bucket);
    if (key * BUCKET_MS - AHEAD_MS <= now) bucket.open = true;
    else if (key < this.openerKey) this.armOpener(key, now);
    return bucket;
  }

  private armOpener(key: number, now: number): void {
    if (this.opener !== undefined) this.wheel.clearTimeout(this.opener);
    this.openerKey = key;
    this.opener = this.wheel.setTimeout(this.openDue, key * BUCKET_MS - AHEAD_MS - now);
  }

  /** Opens the buckets whose time has come, and arms the timer for the next one. */
  private readonly openDue = (): void => {
    this.opener = undefined;
    this.openerKey = Infinity;
    const now = this.now();
    let nextKey = Infinity;
    for (const bucket of this.buckets.values()) {
      if (bucket.open) continue;
      if (bucket.key * BUCKET_MS - AHEAD_MS <= now) {
        bucket.open = true;
        if (bucket.next < bucket.messages.length) this.queue(bucket);
      } else if (bucket.key < nextKey) nextKey = bucket.key;
    }
    if (nextKey !== Infinity) this.armOpener(nextKey, now);
  };

  /** Drops buckets whose second has passed: a walk of them at most once a second. */
  private dropPast(now: number): void {
    const current = Math.floor(now / BUCKET_MS);
    if (current <= this.droppedBefore) return;
    this.droppedBefore = current;
    for (const [key, bucket] of this.buckets) {
      if (key >= current) continue;
      this.buckets.delete(key);
      this.noted -= bucket.messages.length - bucket.next;
      bucket.messages = [];
      bucket.next = 0;
      if (bucket.queued) this.work.splice(this.work.indexOf(bucket), 1);
      bucket.queued = false;
      if (bucket === this.last) this.last = undefined;
    }
  }

  private queue(bucket: Bucket): void {
    bucket.queued = true;
    this.work.push(bucket);
    this.queueStep();
  }

  private queueStep(): void {
    if (this.stepQueued || this.busyTimer !== undefined) return;
    this.stepQueued = true;
    realSetImmediate(this.step);
  }

  /** Decodes for at most STEP_BUDGET_MS, then leaves the rest for the next turn. */
  private readonly step = (): void => {
    this.stepQueued = false;
    if (this.work.length === 0) return;
    this.dropPast(this.now());
    if (this.work.length === 0) return;
    if (this.backlogged()) {
      this.busyTimer = realSetTimeout(() => {
        this.busyTimer = undefined;
        this.queueStep();
      }, BUSY_RETRY_MS);
      this.busyTimer.unref();
      return;
    }
    const until = realClock.now() + STEP_BUDGET_MS;
    let light = 0;
    while (this.work.length > 0) {
      const bucket = this.work[0];
      const messages = bucket.messages;
      while (bucket.next < messages.length) {
        const message = messages[bucket.next];
        messages[bucket.next++] = undefined as unknown as AheadMessage;
        this.noted--;
        const size = this.decode(message, bucket.key);
        if ((size > 1024 || (++light & 15) === 0) && realClock.now() >= until) {
          this.queueStep();
          return;
        }
      }
      bucket.messages = [];
      bucket.next = 0;
      bucket.queued = false;
      this.work.shift();
    }
  };

  /** Parses a noted message's payload if that is still worth it; the text's length, or 0. */
  private decode(message: AheadMessage, key: number): number {
    if (
      message.decoded !== UNDECODED ||
      !message.held ||
      message.status !== 'scheduled' ||
      Math.floor(message.deliverAt / BUCKET_MS) !== key
    ) {
      return 0;
    }
    const held = heldPayload(message);
    if (held === undefined) return 0;
    const size = sizeOf(held);
    if (this.decodedChars + size > MAX_DECODED_CHARS) return 0;
    try {
      message.decoded = decodePayload(message.payloadKind, held);
    } catch {
      return size; // left for the delivery, which reports it as it always would
    }
    this.decodedChars += size;
    return size;
  }
}
