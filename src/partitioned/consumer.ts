/**
 * The consumer's side of a node: receive, ack, nack on any partition (docs/cluster.md,
 * "Consumers"). Per topic, a hint of partitions with ready messages, fed by their channels and
 * dropped when a take comes back short; every partition is scanned at most every `scanMs` with
 * nothing hinted, and at least every `rescanMs` (a lost notification costs a scan, never a
 * message). A receipt `c<partition>.<attempt>.<id>` names the slot and the delivery.
 *
 * What is kept per topic is kept only while it can matter, so that topics named per order or
 * tenant cost nothing once done with: a scan time until it is older than both `scanMs` and
 * `rescanMs` (a receive then scans, as it would with none); hints while there is a scan time
 * (a topic without one is scanned first); notifications while a take of the topic is under
 * way (only those tell a take anything); waiters while they wait.
 */

import { ID_PATTERN, decodePayload, retryDelay } from '../queue/message.js';
import type { EventSource } from '../queue/events.js';
import type { ReceivedMessage } from '../queue/types.js';
import type { Delivery, PartitionDriver } from './driver.js';
import { MAX_RECORD_OVERHEAD, decodeRecord, placeOf } from './record.js';
import { GatedBatches, turnBatches } from './gated-batches.js';

export type NackOutcome = 'retry' | 'dead';

/** A nack's outcome; a dead letter as its `dead` event and span tell it. */
export interface Nacked {
  outcome: NackOutcome;
  dead?: EventSource;
}

export interface ConsumerOptions {
  partitions: number;
  windowMs: number;
  visibilityMs: number;
  /** A long poll looks again this often. Default 250 ms. */
  scanMs?: number;
  /** Every partition's ready list is asked at least this often, hints or not. Default 1,000 ms. */
  rescanMs?: number;
  /** Bounds how many partitions one receive asks at once within its bytes. Default 1 MiB. */
  maxPayloadBytes?: number;
}

type Waiter = { wake: () => void };

const RECEIPT = /^c(\d+)\.(\d+)\.(.+)$/;

/** The fewest messages a partition is asked for when several are: 64 calls of one cost more. */
const MIN_SHARE = 8;

/** The most acks one ack call carries (of one partition). */
const ACK_BATCH = 500;
/** The most acks one call carries where a call takes several partitions' (ackMany). */
const ACK_MOST = 2_000;
/**
 * Where calls take several partitions' acks: consume()'s acks, which no caller waits for, go out
 * at most this often, together (each call has a fixed price; at 1,000 deliveries/s they were
 * ~1.5 a call). An ack of queue.ack() goes out as soon as no other call is under way.
 */
const QUIET_ACK_GAP_MS = 10;
/** Scan times kept before old ones are looked for (and again each time they have doubled). */
const SCANS_KEPT = 1_024;

interface PendingAck extends Delivery {
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
  /** scannedAt's size at which old scan times are dropped next. */
  private pruneScansAt = SCANS_KEPT;
  private readonly rescanMs: number;
  private readonly largestRecord: number;
  /**
   * Per topic with takes under way: how many, and per partition the count of notifications
   * when the last one came (a take compares it with the count when it asked).
   */
  private readonly taking = new Map<string, { takes: number; notices: Map<number, number> }>();
  private noticeCount = 0;
  /** `<partition> <topic>` -> when its messages fired ahead are ready, and the timer for it. */
  private readonly later = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  /** Acks made in one turn go to each partition as one call (a burst acks many at once). */
  private readonly acks: { add(partition: number, ack: PendingAck): void };
  /** consume()'s acks (`quiet`): as `acks`, or gathered for QUIET_ACK_GAP_MS. */
  private readonly quietAcks: { add(partition: number, ack: PendingAck): void };
  /** How often a topic's settings changed: a long poll that sees it move ends empty. */
  generation: (topic: string) => number = () => 0;

  constructor(
    private readonly driver: PartitionDriver,
    private readonly options: ConsumerOptions,
  ) {
    if (this.driver.ackMany === undefined) {
      this.acks = turnBatches<number, PendingAck>((partition, batch) => {
        for (let from = 0; from < batch.length; from += ACK_BATCH) {
          void this.sendAcks(partition, batch.slice(from, from + ACK_BATCH));
        }
      });
      this.quietAcks = this.acks;
    } else {
      // Where the store takes several partitions' acks in one call: gathered while it is busy.
      const sendMany = (batches: Map<number, PendingAck[]>) => this.sendAckMany(batches);
      this.acks = new GatedBatches(sendMany, 1, ACK_MOST);
      this.quietAcks = new GatedBatches(sendMany, 1, ACK_MOST, QUIET_ACK_GAP_MS);
    }
    this.scanMs = options.scanMs ?? 250;
    this.rescanMs = options.rescanMs ?? 1_000;
    this.largestRecord = (options.maxPayloadBytes ?? 1 << 20) + MAX_RECORD_OVERHEAD;
  }

  /** Wakes the long polls on a topic (its settings changed). */
  wakeTopic(topic: string): void {
    for (const waiter of [...(this.waiters.get(topic) ?? [])]) waiter.wake();
  }

  /**
   * `<at> <topic>`: messages of `topic` in `partition` were fired ahead and are ready at `at`;
   * told then as onReady tells it. One timer a partition and topic, for the earliest time told
   * (a take then tells of those left for later), and only for a topic this node receives from.
   */
  onReadyAt(partition: number, event: string): void {
    const space = event.indexOf(' ');
    const at = Number(event.slice(0, space));
    const topic = event.slice(space + 1);
    if (space < 0 || !Number.isFinite(at) || this.closing) return;
    const wait = at - Date.now();
    if (wait <= 0) return this.onReady(partition, topic);
    if (!this.scannedAt.has(topic) && !this.waiters.has(topic) && !this.taking.has(topic)) return;
    const key = `${partition} ${topic}`;
    const pending = this.later.get(key);
    if (pending !== undefined) {
      if (pending.at <= at) return;
      clearTimeout(pending.timer);
    }
    // A millisecond over: a timer may run in the millisecond before its time.
    const timer = setTimeout(() => {
      this.later.delete(key);
      this.onReady(partition, topic);
    }, wait + 1);
    this.later.set(key, { at, timer });
  }

  /** A partition's channel said messages of `topic` became ready. */
  onReady(partition: number, topic: string): void {
    // Every node hears of every topic: one not received from here lately gets no hint.
    if (this.scannedAt.has(topic)) this.hint(topic, [partition]);
    this.taking.get(topic)?.notices.set(partition, ++this.noticeCount);
    for (const waiter of this.waiters.get(topic) ?? []) waiter.wake();
  }

  /** A long poll of up to `waitMs`; `signal` ends it early, answering what it has (none). */
  async receive(
    topic: string,
    options: { max?: number; waitMs?: number; visibilityMs?: number; maxBytes?: number } = {},
    signal?: AbortSignal,
  ): Promise<ReceivedMessage[]> {
    // Checked by the facade (checked-queue.ts), as every backend's arguments are.
    const { max = 1, waitMs = 0, visibilityMs = this.options.visibilityMs } = options;
    const maxBytes = options.maxBytes ?? 16 << 20;
    const until = Date.now() + waitMs;
    const generation = this.generation(topic);
    for (;;) {
      const got = await this.take(topic, max, visibilityMs, maxBytes, this.shouldScan(topic));
      if (got.length > 0 || Date.now() >= until || signal?.aborted) return got;
      // A notification came while the take was under way: take again rather than wait.
      if (this.hints.get(topic)?.size) continue;
      await this.waitFor(topic, Math.min(this.scanMs, until - Date.now()), signal);
      if (signal?.aborted) return [];
      // As on the embedded queue (the gate then waits out the rest as the settings say).
      if (this.closing || this.generation(topic) !== generation) return [];
    }
  }

  /**
   * `durable`: alone, waited for as a schedule is; else with the other acks of the turn.
   * `quiet`: an ack of consume()'s, which nobody waits for (QUIET_ACK_GAP_MS).
   */
  async ack(receipt: string, durable = false, quiet = false): Promise<boolean> {
    const at = this.parseReceipt(receipt);
    if (at === undefined) return false;
    const { partition, id, bucket, attempt } = at;
    if (durable) return (await this.driver.ack(partition, [{ id, bucket, attempt }], true))[0];
    const gate = quiet ? this.quietAcks : this.acks;
    return new Promise((resolve, reject) => {
      gate.add(partition, { id, bucket, attempt, resolve, reject });
    });
  }

  private async sendAcks(partition: number, batch: PendingAck[]): Promise<void> {
    try {
      const done = await this.driver.ack(partition, batch, false);
      batch.forEach((a, i) => a.resolve(done[i]));
    } catch (err) {
      for (const a of batch) a.reject(err);
    }
  }

  private async sendAckMany(batches: Map<number, PendingAck[]>): Promise<void> {
    const calls = [...batches]
      .sort(([a], [b]) => a - b)
      .map(([partition, deliveries]) => ({ partition, deliveries }));
    try {
      const answers = await this.driver.ackMany!(calls);
      calls.forEach((call, k) => call.deliveries.forEach((a, i) => a.resolve(answers[k][i])));
    } catch (err) {
      for (const call of calls) for (const a of call.deliveries) a.reject(err);
    }
  }

  /** Fails a delivery; undefined when the receipt names no delivery still out. */
  async nack(
    receipt: string,
    options: { delayMs?: number; reason?: string } = {},
    durable = false,
  ): Promise<Nacked | undefined> {
    const at = this.parseReceipt(receipt);
    if (at === undefined) return undefined;
    const { partition, id, bucket, attempt } = at;
    let stored: Awaited<ReturnType<PartitionDriver['stored']>>;
    let delay = options.delayMs;
    if (delay === undefined) {
      stored = await this.driver.stored(at);
      if (stored === undefined) return undefined;
      delay = retryDelay(decodeRecord(stored.record).backoff, attempt);
    }
    const due = Date.now() + delay;
    const window = Math.floor(due / this.options.windowMs);
    const retry = { id, bucket, attempt, due, window };
    const outcome = await this.driver.nack(partition, retry, options.reason ?? '', durable);
    if (outcome !== 'dead') return outcome === undefined ? undefined : { outcome };
    // The dead letter's span continues the trace in its record. The nack is done by now: a
    // failed read costs the span, not the nack.
    stored ??= await this.driver.stored(at).catch(() => undefined);
    if (stored === undefined) return { outcome };
    const { topic, trace } = decodeRecord(stored.record);
    return { outcome, dead: { id, topic, deliverAt: stored.deliverAt, attempts: attempt, trace } };
  }

  /** take() under way: notifications of its topic are counted meanwhile. */
  private async take(
    topic: string,
    max: number,
    visibilityMs: number,
    maxBytes: number,
    scan: boolean,
  ): Promise<ReceivedMessage[]> {
    let taking = this.taking.get(topic);
    if (taking === undefined) this.taking.set(topic, (taking = { takes: 0, notices: new Map() }));
    taking.takes++;
    try {
      return await this.takeFrom(topic, max, visibilityMs, maxBytes, scan, taking.notices);
    } finally {
      if (--taking.takes === 0) this.taking.delete(topic);
    }
  }

  private async takeFrom(
    topic: string,
    max: number,
    visibilityMs: number,
    maxBytes: number,
    scan: boolean,
    notices: ReadonlyMap<number, number>,
  ): Promise<ReceivedMessage[]> {
    const candidates = scan ? await this.scan(topic) : [...(this.hints.get(topic) ?? [])];
    const out: ReceivedMessage[] = [];
    let bytesLeft = maxBytes;
    // Start at a different partition each time, so that no partition is always first.
    const start = this.next++ % Math.max(1, candidates.length);
    let round = candidates.map((_, k) => candidates[(start + k) % candidates.length]);
    // Partitions are asked at once (at most want / MIN_SHARE) for equal shares of the messages
    // and bytes still wanted, no more than the bytes hold largest records (each first record
    // fits its part); those that gave their whole share may have more and are asked again.
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
      // Settled one by one: the messages of takes that answered are in flight under this
      // receive, and are handed out even when another partition's take failed (dropped, they
      // would wait out their visibility and count an attempt no consumer saw).
      const replies = await Promise.allSettled(
        asked.map((p, k) => this.driver.take(p, topic, counts[k], visibilityMs, bytes)),
      );
      round = round.slice(asked.length);
      let failed: PromiseRejectedResult | undefined;
      for (const [k, reply] of replies.entries()) {
        if (reply.status === 'rejected') {
          failed ??= reply;
          continue;
        }
        const rows = reply.value;
        const partition = asked[k];
        // A short answer empties the hint, unless a notification came after the ask.
        if (rows.length >= counts[k]) round.push(partition);
        else if ((notices.get(partition) ?? 0) <= sentAt) {
          this.unhint(topic, partition);
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
      }
      if (failed !== undefined) {
        if (out.length === 0) throw failed.reason;
        break;
      }
    }
    return out;
  }

  /**
   * Whether to ask every partition, not only the hinted ones: also every `rescanMs` with hints
   * (under steady load those never run dry, and one whose notifications were lost would wait).
   */
  private shouldScan(topic: string): boolean {
    const now = Date.now();
    const since = now - (this.scannedAt.get(topic) ?? 0);
    // At most one scan every scanMs: a Worker receives each time it frees a slot.
    if (since < (this.hints.get(topic)?.size ? this.rescanMs : this.scanMs)) return false;
    this.scannedAt.set(topic, now);
    if (this.scannedAt.size >= this.pruneScansAt) this.pruneScans(now);
    return true;
  }

  /**
   * Drops the scan times that decide nothing any more (older than scanMs and rescanMs: the
   * next receive scans either way) and the hints of their topics. Run once the map doubled
   * since the last time, so it costs O(1) a scan.
   */
  private pruneScans(now: number): void {
    const stale = Math.max(this.scanMs, this.rescanMs);
    for (const [topic, at] of this.scannedAt) if (now - at >= stale) this.scannedAt.delete(topic);
    // Their hints, and any a scan slower than `stale` brought after its topic's time went.
    for (const topic of this.hints.keys()) if (!this.scannedAt.has(topic)) this.hints.delete(topic);
    this.pruneScansAt = Math.max(SCANS_KEPT, 2 * this.scannedAt.size);
  }

  /** The partitions whose ready list for `topic` is not empty, all asked at once. */
  private async scan(topic: string): Promise<number[]> {
    const found = await this.driver.readyPartitions(topic, this.options.partitions);
    // Added to the hints, not replacing them: one notified during the scan may have answered 0.
    this.hint(topic, found);
    return found;
  }

  private hint(topic: string, partitions: readonly number[]): void {
    if (partitions.length === 0) return;
    let hint = this.hints.get(topic);
    if (hint === undefined) this.hints.set(topic, (hint = new Set()));
    for (const p of partitions) hint.add(p);
  }

  private unhint(topic: string, partition: number): void {
    const hint = this.hints.get(topic);
    if (hint?.delete(partition) === true && hint.size === 0) this.hints.delete(topic);
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

  /** Waits for a notice of `topic`, `ms`, or `signal` to abort, whichever comes first. */
  private waitFor(topic: string, ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      let set = this.waiters.get(topic);
      if (set === undefined) this.waiters.set(topic, (set = new Set()));
      const waiter: Waiter = {
        wake: () => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', waiter.wake);
          set.delete(waiter);
          if (set.size === 0 && this.waiters.get(topic) === set) this.waiters.delete(topic);
          resolve();
        },
      };
      const timer = setTimeout(waiter.wake, Math.max(0, ms));
      set.add(waiter);
      if (signal?.aborted) waiter.wake();
      else signal?.addEventListener('abort', waiter.wake, { once: true });
    });
  }

  /** The delivery a receipt names; undefined for a string that is not one of this queue's. */
  private parseReceipt(receipt: string) {
    const match = RECEIPT.exec(receipt);
    if (match === null || !ID_PATTERN.test(match[3])) return undefined;
    const partition = Number(match[1]);
    const { partitions } = this.options;
    if (partition >= partitions) return undefined;
    const id = match[3];
    const { bucket } = placeOf(id, partitions);
    return { partition, id, bucket, attempt: Number(match[2]) };
  }

  /** Ends every long poll, empty, and those started from now on at their first look. */
  close(): void {
    this.closing = true;
    for (const { timer } of this.later.values()) clearTimeout(timer);
    this.later.clear();
    this.wakeAll();
  }

  wakeAll(): void {
    for (const set of this.waiters.values()) for (const w of [...set]) w.wake();
  }
}
