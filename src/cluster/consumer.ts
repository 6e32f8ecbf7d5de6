/**
 * The consumer's side of a cluster node: receive, ack, nack (docs/cluster.md, "Consumers").
 * Any node takes from any partition; ready messages of a topic are spread over the partitions'
 * ready lists.
 *
 * Which partitions to ask: a hint per topic of partitions known to have ready messages, fed by
 * the partitions' channels ("r <topic>" when messages of the topic became ready) and dropped
 * when a take comes back short. A receive with nothing hinted scans every partition's ready
 * list length, at most once every `scanMs` (so that lost notifications cost a scan, never a
 * message); a long poll waits for a notification, re-scanning every `scanMs`; every partition
 * is asked at least every `rescanMs` even while hints keep coming (notifications can be lost in
 * a failover).
 *
 * A receipt names the partition, the attempt and the id: `c<partition>.<attempt>.<id>`, so ack
 * and nack go straight to the right slot from any node, and a receipt of an earlier delivery of
 * the same message is refused (its attempt is not the current one).
 */

import { TickwheelTypeError } from '../errors.js';
import { checkOption, describe } from '../validate.js';
import { ID_PATTERN, checkTopic, decodePayload, retryDelay } from '../queue/message.js';
import type { EventSource } from '../queue/events.js';
import type { ReceivedMessage } from '../queue/types.js';
import type { Valkey } from '../valkey/connection.js';
import * as tw from './functions.js';
import { metaKey, partitionPrefix } from './keys.js';
import { MAX_RECORD_OVERHEAD, decodeRecord, placeOf } from './record.js';

/** What a nack did: the delivery is scheduled again, or it was the last attempt. */
export type NackOutcome = 'retry' | 'dead';

/** A nack's outcome; a dead letter as its `dead` event and span tell it, once it is read. */
export interface Nacked {
  outcome: NackOutcome;
  dead?: EventSource;
}

/** How a delivery ended, as the queue's events name it. */
export type Settled = 'acked' | 'failed' | 'dead';

/** The event of a nack's outcome; undefined when the nack found no delivery still out. */
export function settledBy(outcome: NackOutcome | undefined): Settled | undefined {
  return outcome === undefined ? undefined : outcome === 'retry' ? 'failed' : 'dead';
}

/** Producer.durably: a write sent where a durability wait covers it, then waited for. */
export type DurableWrite = <T>(
  meta: string,
  what: string,
  write: (valkey: Valkey) => Promise<T>,
) => Promise<T>;

export interface ConsumerOptions {
  queue: string;
  partitions: number;
  windowMs: number;
  visibilityMs: number;
  /** A long poll looks again this often. Default 250 ms. */
  scanMs?: number;
  /** Every partition's ready list is asked at least this often, hints or not. Default 1,000 ms. */
  rescanMs?: number;
  /**
   * The largest payload a message of this queue can have (the nodes' maxPayloadBytes): bounds
   * how many partitions one receive asks at once within its byte budget. Default 1 MiB.
   */
  maxPayloadBytes?: number;
}

interface Waiter {
  wake: () => void;
}

const RECEIPT = /^c(\d+)\.(\d+)\.(.+)$/;

/**
 * The fewest messages a partition is asked for when several are asked at once: a Worker with
 * 64 free slots asked 64 partitions for one each, and under a burst (every partition full) that
 * was a call a message where one call took 64.
 */
const MIN_SHARE = 8;

/** The most acks one tw_ack call carries. */
const ACK_BATCH = 500;

interface PendingAck extends tw.Delivery {
  resolve: (done: boolean) => void;
  reject: (err: unknown) => void;
}

export class Consumer {
  private readonly hints = new Map<string, Set<number>>();
  private readonly waiters = new Map<string, Set<Waiter>>();
  private readonly scanMs: number;
  private next = 0;
  private closing = false;
  private readonly scannedAt = new Map<string, number>();
  private readonly rescanMs: number;
  private readonly largestRecord: number;
  /** Per topic and partition, the count of notifications when the last one came. */
  private readonly notices = new Map<string, Map<number, number>>();
  private noticeCount = 0;
  private readonly acks = new Map<number, PendingAck[]>();
  private acksQueued = false;
  /**
   * How often a topic's settings changed (the queue's TopicGate): a woken long poll that sees it
   * move ends empty, and the gate looks at the settings again.
   */
  generation: (topic: string) => number = () => 0;

  constructor(
    private readonly valkey: Valkey,
    private readonly options: ConsumerOptions,
  ) {
    this.scanMs = options.scanMs ?? 250;
    this.rescanMs = options.rescanMs ?? 1_000;
    this.largestRecord = (options.maxPayloadBytes ?? 1 << 20) + MAX_RECORD_OVERHEAD;
  }

  /** Wakes the long polls on a topic (its settings changed). */
  wakeTopic(topic: string): void {
    for (const waiter of [...(this.waiters.get(topic) ?? [])]) waiter.wake();
  }

  /** A partition's channel said messages of `topic` became ready. */
  onReady(partition: number, topic: string): void {
    let hint = this.hints.get(topic);
    if (hint === undefined) this.hints.set(topic, (hint = new Set()));
    hint.add(partition);
    let notices = this.notices.get(topic);
    if (notices === undefined) this.notices.set(topic, (notices = new Map()));
    notices.set(partition, ++this.noticeCount);
    for (const waiter of this.waiters.get(topic) ?? []) waiter.wake();
  }

  async receive(
    topic: string,
    options: { max?: number; waitMs?: number; visibilityMs?: number; maxBytes?: number } = {},
  ): Promise<ReceivedMessage[]> {
    checkTopic(topic);
    const max = checkOption(options.max ?? 1, 'max', 1, 1_000, true);
    const waitMs = checkOption(options.waitMs ?? 0, 'waitMs', 0, 3_600_000);
    const visibilityMs = checkOption(
      options.visibilityMs ?? this.options.visibilityMs,
      'visibilityMs',
      1,
      86_400_000,
    );
    const maxBytes = checkOption(options.maxBytes ?? 16 << 20, 'maxBytes', 1);
    const until = Date.now() + waitMs;
    const generation = this.generation(topic);
    for (;;) {
      const got = await this.take(topic, max, visibilityMs, maxBytes, this.shouldScan(topic));
      if (got.length > 0 || Date.now() >= until) return got;
      // A notification came while the take was under way: take again rather than wait.
      if (this.hints.get(topic)?.size) continue;
      await this.waitFor(topic, Math.min(this.scanMs, until - Date.now()));
      // Closing, or the topic's settings changed meanwhile: a long poll ends empty, as the
      // embedded queue's does (the gate waits out the rest of it as the settings say).
      if (this.closing || this.generation(topic) !== generation) return [];
    }
  }

  /**
   * Acks made in one turn of the event loop go to each partition as one tw_ack (under a burst a
   * Worker acks many deliveries of a partition in a turn: one call each cost Valkey a call's
   * overhead each).
   */
  ack(receipt: string, durably?: DurableWrite): Promise<boolean> {
    let parsed: ReturnType<Consumer['parseReceipt']>;
    try {
      parsed = this.parseReceipt(receipt);
    } catch (err) {
      // A bad receipt rejects, as every other call's bad argument does.
      return Promise.reject(err);
    }
    if (parsed === undefined) return Promise.resolve(false);
    const { partition, attempt, id } = parsed;
    const { bucket } = placeOf(id, this.options.partitions);
    if (durably !== undefined) {
      const meta = metaKey(this.options.queue, partition);
      const delivery = { id, bucket, attempt };
      return durably(meta, id, async (valkey) => (await tw.ack(valkey, meta, [delivery]))[0]);
    }
    return new Promise((resolve, reject) => {
      let batch = this.acks.get(partition);
      if (batch === undefined) this.acks.set(partition, (batch = []));
      batch.push({ id, bucket, attempt, resolve, reject });
      if (!this.acksQueued) {
        this.acksQueued = true;
        setImmediate(() => this.flushAcks());
      }
    });
  }

  private flushAcks(): void {
    this.acksQueued = false;
    const batches = [...this.acks];
    this.acks.clear();
    for (const [partition, batch] of batches) {
      for (let from = 0; from < batch.length; from += ACK_BATCH) {
        void this.sendAcks(partition, batch.slice(from, from + ACK_BATCH));
      }
    }
  }

  private async sendAcks(partition: number, batch: PendingAck[]): Promise<void> {
    try {
      const done = await tw.ack(this.valkey, metaKey(this.options.queue, partition), batch);
      batch.forEach((a, i) => a.resolve(done[i]));
    } catch (err) {
      for (const a of batch) a.reject(err);
    }
  }

  /**
   * Fails a delivery: 'retry' when it is scheduled again, 'dead' when that was its last attempt
   * (with the dead letter as its event and span tell it), undefined when the receipt names no
   * delivery that is still out.
   */
  async nack(
    receipt: string,
    options: { delayMs?: number; reason?: string } = {},
    durably?: DurableWrite,
  ): Promise<Nacked | undefined> {
    const parsed = this.parseReceipt(receipt);
    if (parsed === undefined) return undefined;
    const { partition, attempt, id } = parsed;
    const { bucket } = placeOf(id, this.options.partitions);
    const at = { meta: metaKey(this.options.queue, partition), id, bucket };
    let stored: Awaited<ReturnType<typeof tw.stored>>;
    let delay = options.delayMs;
    if (delay === undefined) {
      stored = await tw.stored(this.valkey, at);
      if (stored === undefined) return undefined;
      delay = retryDelay(decodeRecord(stored.record).backoff, attempt);
    } else {
      checkOption(delay, 'delayMs', 0);
    }
    const due = Date.now() + delay;
    const window = Math.floor(due / this.options.windowMs);
    const retry = { id, bucket, attempt, due, window };
    const reason = options.reason ?? '';
    const outcome =
      durably === undefined
        ? await tw.nack(this.valkey, at.meta, retry, reason)
        : await durably(at.meta, id, (valkey) => tw.nack(valkey, at.meta, retry, reason));
    if (outcome !== 'dead') return outcome === undefined ? undefined : { outcome };
    // The dead letter's span continues the trace kept in its record, read here if the nack did
    // not need it. The nack is done by now: a failed read costs the span, not the nack.
    stored ??= await tw.stored(this.valkey, at).catch(() => undefined);
    if (stored === undefined) return { outcome };
    const { topic, trace } = decodeRecord(stored.record);
    return { outcome, dead: { id, topic, deliverAt: stored.deliverAt, attempts: attempt, trace } };
  }

  private async take(
    topic: string,
    max: number,
    visibilityMs: number,
    maxBytes: number,
    scan: boolean,
  ): Promise<ReceivedMessage[]> {
    let candidates: number[];
    if (scan) {
      candidates = await this.scan(topic);
    } else {
      candidates = [...(this.hints.get(topic) ?? [])];
    }
    const out: ReceivedMessage[] = [];
    let bytesLeft = maxBytes;
    // Start at a different partition each time, so that no partition is always first.
    const start = this.next++ % Math.max(1, candidates.length);
    let round = candidates.map((_, k) => candidates[(start + k) % candidates.length]);
    // The hinted partitions are asked at once, each for its share of what is still wanted (one
    // after another, a partition waited a round trip for each partition before it); those that
    // gave their whole share may have more and are asked again (at most want / MIN_SHARE of them
    // at once, the rest in the next round). Each gets an equal part of the
    // byte budget, so no more partitions are asked at once than the budget holds largest
    // records: every partition's first record fits its part, and the total stays within it.
    while (round.length > 0 && out.length < max && bytesLeft > 0) {
      const want = max - out.length;
      const width = Math.max(
        1,
        Math.min(Math.ceil(want / MIN_SHARE), Math.floor(bytesLeft / this.largestRecord)),
      );
      const asked = round.slice(0, width);
      const counts = asked.map(
        (_, k) => Math.floor(want / asked.length) + (k < want % asked.length ? 1 : 0),
      );
      const bytes = asked.length === 1 ? bytesLeft : Math.floor(bytesLeft / asked.length);
      const sentAt = this.noticeCount;
      const meta = (partition: number) => metaKey(this.options.queue, partition);
      const replies = await Promise.all(
        asked.map((p, k) => tw.take(this.valkey, meta(p), topic, counts[k], visibilityMs, bytes)),
      );
      round = round.slice(asked.length);
      replies.forEach((rows, k) => {
        const partition = asked[k];
        // A short answer empties the hint, unless a notification came after the ask: what
        // it announced may have become ready after the take ran.
        if (rows.length >= counts[k]) round.push(partition);
        else if ((this.notices.get(topic)?.get(partition) ?? 0) <= sentAt) {
          this.hints.get(topic)?.delete(partition);
        }
        for (const { id, attempts, deliverAt, record } of rows) {
          const { payloadKind, payload, trace } = decodeRecord(record);
          bytesLeft -= record.length;
          const delivery: ReceivedMessage = {
            id,
            topic,
            payload: decodePayload(payloadKind, payload),
            deliverAt,
            attempts,
            receipt: `c${partition}.${attempts}.${id}`,
          };
          if (trace !== undefined) delivery.trace = trace;
          out.push(delivery);
        }
      });
    }
    return out;
  }

  /**
   * Whether to ask every partition rather than the hinted ones: when nothing is hinted (at
   * most once every `scanMs`), and at least every `rescanMs` whatever the hints say. Hints
   * come from notifications, which a failover or a reconnect can lose; under steady load the
   * hinted partitions never run dry, so without the rescan a partition whose notifications
   * were lost would wait for the load to stop.
   */
  private shouldScan(topic: string): boolean {
    const now = Date.now();
    const since = now - (this.scannedAt.get(topic) ?? 0);
    // With nothing hinted, at most one scan every scanMs: a consumer that receives often (a
    // Worker frees a slot per message) would otherwise scan every partition each time.
    if (since < (this.hints.get(topic)?.size ? this.rescanMs : this.scanMs)) return false;
    this.scannedAt.set(topic, now);
    return true;
  }

  /** The partitions whose ready list for `topic` is not empty, all asked at once. */
  private async scan(topic: string): Promise<number[]> {
    const { queue, partitions } = this.options;
    const lengths = await Promise.all(
      Array.from({ length: partitions }, (_, p) => {
        const key = `${partitionPrefix(queue, p)}ready:${topic}`;
        return this.valkey.command(key, ['LLEN', key], true);
      }),
    );
    const found: number[] = [];
    lengths.forEach((n, p) => {
      if (Number(n) > 0) found.push(p);
    });
    // Added to the hints, not put in their place: a partition notified while the scan was
    // under way may have answered 0 before its messages became ready.
    if (found.length > 0) {
      let hint = this.hints.get(topic);
      if (hint === undefined) this.hints.set(topic, (hint = new Set()));
      for (const p of found) hint.add(p);
    }
    return found;
  }

  /** Waits until messages of `topic` may be ready (a notice), `ms`, or `signal` aborts. */
  async waitReady(topic: string, ms: number, signal: AbortSignal): Promise<void> {
    if (signal.aborted || this.closing) return;
    if (this.hints.get(topic)?.size) return;
    const waiting = this.waitFor(topic, Math.min(ms, this.scanMs));
    const wake = () => this.wakeTopic(topic);
    signal.addEventListener('abort', wake, { once: true });
    try {
      await waiting;
    } finally {
      signal.removeEventListener('abort', wake);
    }
  }

  private waitFor(topic: string, ms: number): Promise<void> {
    return new Promise((resolve) => {
      let set = this.waiters.get(topic);
      if (set === undefined) this.waiters.set(topic, (set = new Set()));
      const waiter: Waiter = {
        wake: () => {
          clearTimeout(timer);
          set.delete(waiter);
          resolve();
        },
      };
      const timer = setTimeout(waiter.wake, Math.max(0, ms));
      set.add(waiter);
    });
  }

  /**
   * The parts of a receipt; undefined for a string that is not a receipt of this queue (as the
   * embedded queue answers false for a receipt it does not know).
   */
  private parseReceipt(
    receipt: unknown,
  ): { partition: number; attempt: number; id: string } | undefined {
    if (typeof receipt !== 'string') {
      throw new TickwheelTypeError(
        'ERR_TICKWHEEL_INVALID_MESSAGE',
        `receipt must be the string receive() returned, got ${describe(receipt)}`,
      );
    }
    const match = RECEIPT.exec(receipt);
    if (match === null || !ID_PATTERN.test(match[3])) return undefined;
    const partition = Number(match[1]);
    if (partition >= this.options.partitions) return undefined;
    return { partition, attempt: Number(match[2]), id: match[3] };
  }

  /** Ends every long poll, empty, and those started from now on at their first look. */
  close(): void {
    this.closing = true;
    this.wakeAll();
  }

  /** Wakes every long poll. */
  wakeAll(): void {
    for (const set of this.waiters.values()) for (const w of [...set]) w.wake();
  }
}
