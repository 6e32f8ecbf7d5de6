/**
 * The consumer side of the engine: receive, ack, nack, and visibility timeouts running out.
 *
 *   READY ──receive──► IN FLIGHT ──ack──────────────► finished (store.finish, remembered)
 *                          │──nack / visibility timeout──► retry:
 *                          │        attempts left: due again after the backoff (or the
 *                          │        nack's delayMs), moved through the store (horizon.ts)
 *                          │        attempts used up: dead letter (store.bury)
 *
 * A receive takes messages in flight synchronously (near.ts), tells the store (store.handOut:
 * attempts count even if the process dies before the delivery ends), and answers with no
 * promise per message when payloads are in memory; what does not fit `maxBytes` or cannot be
 * read is handed back unreceived. An ack resolves once applied, its record written with the
 * next group commit (a durable one returns the store's promise, shared by a group commit's
 * acks). A nack and a visibility timeout run under the id lock, which covers their write. A
 * write that fails after its ack or nack resolved goes to onFault; a crash before the group
 * commit delivers those messages again: at least once.
 *
 * Deliveries first: acks that are not durable, made while at least DEFER_MIN_READY messages of
 * their topic wait ready, are put off while consumers keep taking, then applied ACK_CHUNK a
 * turn (applying one costs more than a delivery: done first, every delivery of a 100k burst
 * waited for every earlier ack). A put-off ack has ended its delivery (a second ack or a nack
 * of it answers false), and
 *   - is applied within MAX_ACK_DELAY_MS or half its visibility timeout (Lease.ackBy), and
 *     before any visibility timeout is acted on: a handler that succeeded in time is never
 *     delivered again while the queue runs;
 *   - is applied first by a lookup of its id (near.get): get() says 'acked', cancel() finds
 *     nothing, schedule() with its id adds a new message;
 *   - waits with at most MAX_DEFERRED_ACKS others (close() applies them); consume() waits on
 *     its chunk's promise, which settles once the chunk's acks are durable;
 *   - is lost by a crash as an ack not yet fsynced is: redelivered.
 */

import { setImmediate as realSetImmediate } from 'node:timers';
import { faultOf, type FaultReporter } from './faults.js';
import { heldPayload, NACK_REASON, retryDelay, storedBytes, VISIBILITY_REASON } from './message.js';
import { DueGroup, Lease, type HeldTally, type NearMessage } from './near-message.js';
import { EnginePart, type QueueParts } from './parts.js';
import type { ReceivedMessage } from './types.js';

/** The answer of an ack applied and not waited for: one promise for all of them. */
const TRUE = Promise.resolve(true);
/** Put-off acks applied in one go (one turn of the event loop, ~1 ms). */
const ACK_CHUNK = 1024;
/** Acks are put off only while at least this many messages of their topic wait ready. */
const DEFER_MIN_READY = 256;
/** Put-off acks at most: more are applied at once. */
const MAX_DEFERRED_ACKS = 1 << 20;

/** Acks put off together, and the promise consume() waits on for all of them. */
interface AckChunk {
  /**
   * Its first `count` entries are its acks; both arrays are made at ACK_CHUNK entries (grown by
   * push, the two of them made ~50 bytes of garbage an ack during a burst).
   */
  messages: Array<NearMessage | undefined>;
  /** Their receipts' counters when put off: an ack whose delivery ended meanwhile is late. */
  receipts: Float64Array;
  count: number;
  /** The earliest Lease.ackBy of its acks. */
  applyBy: number;
  /** The tally of its latest ack's topic (ready count, last receive). */
  tally: HeldTally;
  /** Acks of it applied ahead of it (near.get of their id), whose durability it waits for. */
  early: Array<Promise<unknown>>;
  done: Promise<unknown>;
  settle: (applied: Promise<unknown>) => void;
}

export class Deliveries extends EnginePart {
  private stopped = false;
  /** Acks put off by ackQuietly, oldest chunk first, and how many. */
  private readonly deferred: AckChunk[] = [];
  private deferredCount = 0;
  private checkQueued = false;
  /**
   * Looks at the put-off acks so far: a receive marks its topic's tally with the current one
   * (HeldTally.receivedInLook), so a look sees whether the topic was received from since the
   * last, with nothing kept per topic here.
   */
  private look = 0;
  /**
   * The last receive's answer and messages, and how many of them were acked in order: an ack
   * of the next one finds its message with no lookup by id or receipt (consume()'s handlers
   * mostly end in the order they started).
   */
  private lastAnswer: ReceivedMessage[] = [];
  private lastTaken: NearMessage[] = [];
  private ackedInOrder = 0;

  private readonly onFault: FaultReporter;
  /** The write watchWrite() watched last, and whether a failed one was told. */
  private lastWatched: Promise<unknown> | undefined;
  private writeFailureTold = false;

  constructor(parts: QueueParts) {
    super(parts);
    this.onFault = parts.settings.onFault;
    this.near.applyPendingAck = (message) => this.applyOne(message);
  }

  /** The queue is closing: a long poll woken from now on answers empty; put-off acks apply. */
  stop(): void {
    this.stopped = true;
    while (this.deferred.length > 0) this.applyChunk();
  }

  async receive(
    topic: string,
    max: number,
    waitMs: number,
    visibilityMs: number,
    maxBytes: number,
    signal: AbortSignal | undefined,
  ): Promise<ReceivedMessage[]> {
    let taken = this.near.take(topic, max, visibilityMs, maxBytes);
    if (taken.length === 0 && waitMs > 0) {
      const generation = this.topics.generation(topic);
      await this.waiters.wait(topic, waitMs, signal);
      // Closing, or woken because the topic's settings changed meanwhile (paused, limited): the
      // gate looks at them again and waits out the rest.
      if (this.stopped || this.topics.generation(topic) !== generation) return [];
      taken = this.near.take(topic, max, visibilityMs, maxBytes);
    }
    return this.answer(topic, taken, maxBytes);
  }

  /** receive() of what is ready now, for consume(): no wait, no promise when payloads are held. */
  receiveNow(
    topic: string,
    max: number,
    visibilityMs: number,
    maxBytes: number,
  ): ReceivedMessage[] | Promise<ReceivedMessage[]> {
    if (this.stopped) return [];
    const taken = this.near.take(topic, max, visibilityMs, maxBytes);
    return taken.length === 0 ? [] : this.answer(topic, taken, maxBytes);
  }

  /**
   * The deliveries of taken messages: indexed loops, apart from the async receive(), which runs
   * too rarely in a burst to be optimised (its loops made an iterator result per message).
   */
  private answer(
    topic: string,
    taken: NearMessage[],
    maxBytes: number,
  ): ReceivedMessage[] | Promise<ReceivedMessage[]> {
    const n = taken.length;
    for (let i = 0; i < n; i++) {
      if (heldPayload(taken[i]) === undefined) return this.readTaken(topic, taken, maxBytes);
    }
    // All payloads in memory (the usual case): no promise per message.
    const now = this.clock.now();
    const answer = new Array<ReceivedMessage>(n);
    for (let i = 0; i < n; i++) {
      const message = taken[i];
      const held = heldPayload(message) as Uint8Array | string;
      answer[i] = received(
        message,
        this.near.ahead.payloadFor(message, held),
        this.near.receiptOf(message),
      );
    }
    this.store.handOut?.(taken, n);
    this.report.delivered(taken, now);
    if (n > 0) (taken[0].tally as HeldTally).receivedInLook = this.look;
    this.lastAnswer = answer;
    this.lastTaken = taken;
    this.ackedInOrder = 0;
    return answer;
  }

  /** Reads payloads not in memory; those past `maxBytes` (or all, if a read fails) go back. */
  private async readTaken(
    topic: string,
    taken: NearMessage[],
    maxBytes: number,
  ): Promise<ReceivedMessage[]> {
    const receipts = taken.map((message) => message.receiptNo);
    let payloads: Array<Uint8Array | string>;
    try {
      payloads = await Promise.all(
        taken.map((message) => heldPayload(message) ?? this.store.payloadOf(message)),
      );
    } catch (err) {
      this.near.handBack(topic, taken, receipts, 0);
      throw err;
    }
    let bytes = 0;
    let fit = 0;
    while (fit < taken.length) {
      bytes += storedBytes(payloads[fit]);
      if (fit > 0 && bytes > maxBytes) break;
      fit++;
    }
    this.near.handBack(topic, taken, receipts, fit);
    const now = this.clock.now();
    const answer: ReceivedMessage[] = [];
    const handed: NearMessage[] = [];
    for (let i = 0; i < fit; i++) {
      const message = taken[i];
      // While its payload was read, the delivery may have ended: its visibility timeout ran out
      // (and another receive may hold it under a new receipt), or it was cancelled or acked.
      // Handing it over now would give this caller another delivery's receipt, or none.
      if (message.receiptNo !== receipts[i] || message.status !== 'inflight') continue;
      const payload = this.near.ahead.payloadFor(message, payloads[i]);
      answer.push(received(message, payload, this.near.receiptOf(message)));
      handed.push(message);
    }
    this.report.delivered(handed, now);
    this.store.handOut?.(handed, handed.length);
    return answer;
  }

  /** False for an unknown or stale receipt; `durable`: resolves once on disk, else once applied. */
  ack(receipt: string, durable = true): Promise<boolean> {
    const message = this.near.owner(receipt);
    if (message === undefined) return Promise.resolve(false);
    // A store that takes no more changes: refused, not answered as applied and never written.
    const refused = this.store.refusal?.();
    if (refused !== undefined) return Promise.reject(refused);
    // Nothing else running on the id (the common case): no lock.
    if (!this.locks.busy(message.id)) {
      // During a burst, put off as consume()'s acks are (the top of the file): deliveries first.
      const tally = message.tally;
      if (durable || !this.defers(tally)) return this.finishAcked(message, durable);
      this.watchWrite(this.deferAck(message, tally), message.id);
      return TRUE;
    }
    return this.ackLocked(receipt, message, durable);
  }

  /**
   * An ack behind its id's lock (a timeout being written, say): applied once that ends, if the
   * delivery is still this receipt's. Apart from ack(): a closure there cost every ack.
   */
  private ackLocked(receipt: string, owner: NearMessage, durable: boolean): Promise<boolean> {
    return this.locks.run(owner.id, () =>
      this.near.owner(receipt) === owner
        ? this.finishAcked(owner, durable)
        : Promise.resolve(false),
    );
  }

  private finishAcked(message: NearMessage, durable: boolean): Promise<boolean> {
    const written = this.finishQuietly(message);
    if (durable) return written.then(() => true);
    this.watchWrite(written, message.id);
    return TRUE;
  }

  /**
   * A write whose caller was answered before it ended (an ack or nack not durable): a failure
   * goes to onFault, once (the store stops at its first failed write). Writes of one group
   * commit share a promise, so a burst of acks watches a handful of promises.
   */
  private watchWrite(written: Promise<unknown>, id: string, what = 'an acked delivery'): void {
    if (written === this.lastWatched) return;
    this.lastWatched = written;
    this.reportFailure(written, id, what);
  }

  /** Apart from watchWrite(): its closure's context was made on every call, watched or not. */
  private reportFailure(written: Promise<unknown>, id: string, what: string): void {
    written.catch((err: unknown) => {
      if (this.writeFailureTold) return;
      this.writeFailureTold = true;
      const cause = err instanceof Error ? err.message : String(err);
      this.onFault(
        faultOf(err, {
          code: 'ERR_TICKWHEEL_IO',
          level: 'error',
          message:
            `${what} (message ${id}) could not be written: ${cause}. After a restart its ` +
            'delivery comes back; the store takes no more changes until the queue is opened again',
          fields: { id },
        }),
      );
    });
  }

  /**
   * Ends an acknowledged delivery; the store's promise as it is: every ack of one group commit
   * shares it, so a consumer waits once per batch. get() reports it acked from here on.
   */
  private finishQuietly(message: NearMessage): Promise<unknown> {
    this.near.release(message);
    const durable = this.store.finish(message, 'acked');
    this.finished.remember(message, 'acked');
    // Its event once durable, as 'scheduled' is; a failed write is the store's to report.
    this.report.acked(message, durable);
    return durable;
  }

  /** ack() for consume(): the store's promise, none of its own; `delivery`: receive()'s, if known. */
  ackQuietly(receipt: string, delivery?: ReceivedMessage): Promise<unknown> {
    let message: NearMessage | undefined;
    const next = this.ackedInOrder;
    if (
      delivery !== undefined &&
      this.lastAnswer[next] === delivery &&
      delivery.receipt === receipt
    ) {
      message = this.lastTaken[next];
      // Still in flight and held, so still that delivery: another one would have needed a
      // receive since, which replaces lastAnswer. A failed store write releases what it held.
      if (message.status !== 'inflight' || message.tally === undefined) message = undefined;
      if (++this.ackedInOrder === this.lastAnswer.length) this.forgetLastReceive();
    }
    message ??= this.near.owner(receipt);
    if (message === undefined || this.locks.busy(message.id)) return this.ack(receipt);
    const tally = message.tally;
    if (!this.defers(tally)) return this.finishQuietly(message);
    return this.deferAck(message, tally);
  }

  /** Whether an ack is put off: while many messages of its topic wait ready (a burst). */
  private defers(tally: HeldTally | undefined): tally is HeldTally {
    return !this.stopped && tally !== undefined && tally.ready >= DEFER_MIN_READY;
  }

  private forgetLastReceive(): void {
    this.lastAnswer = [];
    this.lastTaken = [];
    this.ackedInOrder = 0;
  }

  private deferAck(message: NearMessage, tally: HeldTally): Promise<unknown> {
    let chunk = this.deferred[this.deferred.length - 1];
    if (chunk === undefined || chunk.count === ACK_CHUNK) {
      let settle!: (applied: Promise<unknown>) => void;
      const done = new Promise<unknown>((resolve) => (settle = resolve));
      chunk = {
        messages: new Array<NearMessage | undefined>(ACK_CHUNK),
        receipts: new Float64Array(ACK_CHUNK),
        count: 0,
        applyBy: Infinity,
        tally,
        early: [],
        done,
        settle,
      };
      this.deferred.push(chunk);
    }
    chunk.messages[chunk.count] = message;
    chunk.receipts[chunk.count++] = message.receiptNo;
    chunk.tally = tally;
    message.pendingAck = chunk;
    const ackBy = message.lease?.ackBy ?? 0;
    if (ackBy < chunk.applyBy) chunk.applyBy = ackBy;
    if (++this.deferredCount >= MAX_DEFERRED_ACKS) this.applyChunk();
    this.queueAckCheck();
    return chunk.done;
  }

  private queueAckCheck(): void {
    if (this.checkQueued || this.deferred.length === 0) return;
    this.checkQueued = true;
    // Node's own setImmediate: fake timers installed by a test must not hold acks back.
    realSetImmediate(this.checkDeferred);
  }

  /** A turn later: while consumers keep taking, acks wait (up to applyBy); else a chunk applies. */
  private readonly checkDeferred = (): void => {
    this.checkQueued = false;
    // Still delivering: the latest put-off ack's topic has messages ready and was received from
    // since the last look (not paused, rate-limited to a trickle, or left by its consumers).
    const latest = this.deferred[this.deferred.length - 1];
    const delivering =
      latest !== undefined && latest.tally.ready > 0 && latest.tally.receivedInLook === this.look;
    // Wraps, so that the tallies' field stays a small integer (V8 deoptimises on a change).
    this.look = (this.look + 1) & 0x3fffffff;
    if (!delivering) this.applyChunk();
    this.applyDue();
    this.queueAckCheck();
  };

  /** Applies the chunks whose time is up (Lease.ackBy), whatever else is going on. */
  private applyDue(): void {
    if (this.deferred.length === 0) return;
    const now = this.clock.now();
    for (let i = 0; i < this.deferred.length;) {
      if (this.deferred[i].applyBy <= now) this.applyChunk(i);
      else i++;
    }
  }

  /** A put-off ack's message looked up by id (near.get): finished now, waited for by its chunk. */
  private applyOne(message: NearMessage): void {
    const chunk = message.pendingAck as AckChunk;
    message.pendingAck = undefined;
    if (message.status !== 'inflight' || !message.held) return;
    const applied = this.finishQuietly(message);
    // Handled once the chunk is applied (its promise waits for this one); until then a failed
    // write must not count as an unhandled rejection.
    applied.catch(() => {});
    chunk.early.push(applied);
  }

  private applyChunk(at = 0): void {
    const chunk = this.deferred[at];
    if (chunk === undefined) return;
    this.deferred.splice(at, 1);
    this.deferredCount -= chunk.count;
    const waits: Array<Promise<unknown>> = [...chunk.early];
    let last: Promise<unknown> | undefined;
    const { messages, receipts, count } = chunk;
    for (let i = 0; i < count; i++) {
      const message = messages[i] as NearMessage;
      if (message.pendingAck === chunk) message.pendingAck = undefined;
      // Its delivery ended meanwhile (a visibility timeout, a nack, a cancel): a late ack.
      if (message.receiptNo !== receipts[i] || message.status !== 'inflight') continue;
      let wait: Promise<unknown>;
      try {
        wait = this.locks.busy(message.id)
          ? this.ack(this.near.receiptOf(message))
          : this.finishQuietly(message);
      } catch (err) {
        wait = Promise.reject(err as Error);
      }
      if (wait !== last) waits.push((last = wait));
    }
    chunk.settle(waits.length === 1 ? waits[0] : Promise.all(waits));
  }

  /** Redelivered after `delayMs` (default: its backoff), or dead after its last attempt. */
  async nack(
    receipt: string,
    reason: string | undefined,
    delayMs: number | undefined,
    durable: boolean,
  ): Promise<boolean> {
    const message = this.near.owner(receipt);
    if (message === undefined) return false;
    const refused = this.store.refusal?.();
    if (refused !== undefined) throw refused;
    // Not durable: answered once the message has left the in-flight set (retry() does that in
    // its first step); the lock is held until its record is written, as for a durable one.
    // A failure before that answer rejects it (the race below), one after goes to onFault.
    let applied: ((nacked: boolean) => void) | undefined;
    const answer = durable ? undefined : new Promise<boolean>((resolve) => (applied = resolve));
    const done = this.locks.run(message.id, async () => {
      if (this.near.owner(receipt) !== message) {
        applied?.(false);
        return false;
      }
      this.report.nacked();
      message.lastError = reason ?? NACK_REASON;
      // A nack that makes a dead letter waits for its BURY record: the dead letter is counted
      // and listed from then on, and dead letters are rare enough not to matter to a consumer.
      const burying = message.attempts >= message.maxAttempts;
      const retried = this.retry(message, delayMs);
      if (!burying) applied?.(true);
      await retried;
      return true;
    });
    if (answer === undefined) return done;
    const watched = done.then(() => undefined);
    this.watchWrite(watched, message.id, 'a nacked delivery');
    return Promise.race([answer, done]);
  }

  /** A timer on the wheel: a message's or a dense millisecond's due time, or a lease's end. */
  onTimer(due: NearMessage | Lease | DueGroup): void {
    if (due instanceof DueGroup) {
      this.near.fireGroup(due);
      return;
    }
    if (due instanceof Lease) {
      // Put-off acks first (their ackBy is before any of their leases' deadlines): a handler
      // that succeeded in time is never taken for one that did not.
      this.applyDue();
      for (const message of this.near.expired(due)) this.expire(message);
      return;
    }
    due.timer = undefined;
    if (due.held && due.status === 'scheduled') this.near.fire(due);
  }

  private expire(message: NearMessage): void {
    this.report.expired();
    const receiptNo = message.receiptNo;
    void this.locks
      .run(message.id, async () => {
        // Its delivery ended meanwhile (acked, nacked, cancelled, or delivered again).
        if (receiptNo === 0 || message.receiptNo !== receiptNo || message.status !== 'inflight') {
          return;
        }
        message.lastError = VISIBILITY_REASON;
        await this.retry(message, undefined);
      })
      .catch((err: unknown) => {
        // A store that stopped refuses every expiry alike: told once, as a failed ack is.
        if (this.store.refusal?.() !== undefined) {
          if (this.writeFailureTold) return;
          this.writeFailureTold = true;
        }
        this.onFault(faultOf(err, { fields: { id: message.id } }));
      });
  }

  private async retry(message: NearMessage, delayMs: number | undefined): Promise<void> {
    this.near.release(message);
    if (message.attempts >= message.maxAttempts) {
      await this.store.bury(message);
      this.report.dead(message, message.lastError);
      return;
    }
    const wait = delayMs ?? retryDelay(message.backoff, message.attempts);
    const previous = message.deliverAt;
    message.deliverAt = Math.ceil(this.clock.now() + wait);
    // Told once the retry is written, and before the message is held again: a receive already
    // waiting may take it at once (no backoff), and its next delivery must not come first.
    await this.horizon.relocate(message, previous, () =>
      this.report.failed(message, message.lastError),
    );
  }
}

function received(message: NearMessage, payload: unknown, receipt: string): ReceivedMessage {
  const delivery: ReceivedMessage = {
    id: message.id,
    topic: message.topic,
    payload,
    deliverAt: message.deliverAt,
    attempts: message.attempts,
    receipt,
  };
  // Only when there is one: a queue that never traces hands over the same shape as ever.
  if (message.trace !== undefined) delivery.trace = message.trace;
  return delivery;
}
