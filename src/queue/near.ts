/**
 * The near horizon: the messages held in memory (due before the horizon's end), each in one of
 * three states, with its timer on the queue's wheel. Finishing, retrying and burying are the
 * engine's (they involve the store); this file only moves messages between states.
 *
 *   hold ─► SCHEDULED ──due timer──► READY ──take──► IN FLIGHT ──visibility timer──► (expired)
 *                                      ▲                 │
 *                                      └─── handBack ────┘          release: out of memory,
 *                                                                   from any state
 *
 * In flight, a message's `lease` is the one visibility timer shared by the messages taken with
 * it (a timer per message was ~7% of a burst's profile). Every change of state bumps `version`,
 * so its entries in a ready list go stale. Counts are kept with every change (`tallies` per
 * topic, `minutes`, `due`), so that stats() and dueHistogram() never walk memory (a walk of a
 * million held messages took ~100 ms).
 *
 * Invariants (checked by debugAssert where cheap):
 *   - `message.held` ⇒ `ids.entry(message.id) === message`; `ids.count` counts held messages;
 *   - a held message has a `tally`; the tallies count the held messages in each state;
 *   - a topic has a tally exactly while it holds a message, and a ready list exactly while its
 *     tally counts a ready one: a topic named per order or tenant leaves nothing behind;
 *   - a message in flight, and no other, has a receipt slot and a `lease`, and is in its
 *     lease's `takes`; a lease's `live` counts those, and its timer is pending while that is
 *     above 0. A lease that fired has `live` 0 and timer 0: its messages (in flight under their
 *     id locks until their retry moves them) have no lease.
 *
 * During a horizon load (horizon.ts) messages held are `deferred` (armed after it, behind what
 * it brings), and ids changed through the store are `superseded`: the load may have read them
 * before the change, and a stale copy taken over would deliver a cancelled message.
 */

import { assert, debugAssert, DEBUG } from '../assert.js';
import type { Clock } from '../clock/index.js';
import type { TimerWheel } from '../timer/index.js';
import type { QueueReport } from './report.js';
import { storedBytes, type MessageState } from './message.js';
import { PayloadBudget } from './payload-budget.js';
import { DecodeAhead, DENSE_PER_MS } from './decode-ahead.js';
import {
  bump,
  DueCounts,
  DueGroup,
  Lease,
  MINUTE_MS,
  heldBytes,
  nearMessage,
  type HeldCounts,
  type HeldTally,
  type NearMessage,
} from './near-message.js';
import { HeldIds } from './held-ids.js';
import { ReadyList } from './ready-list.js';
import { Receipts } from './receipts.js';
import type { Waiters } from './waiters.js';

/** Entries of the largest ready list kept spare once empty (16 bytes each: 1 MB). */
const SPARE_READY_CAPACITY = 65_536;
/** Fires that share one clock reading, at most (see fireTime). */
const FIRE_READS = 64;
/**
 * Consumers count as behind for this long after a take left ready messages of its topic
 * behind: meanwhile payloads are not decoded ahead (decode-ahead.ts), which would take CPU
 * from them. A topic nobody takes from (paused, no consumer) does not count.
 */
const BEHIND_MS = 100;
/** Stale entries a due group tolerates besides as many as its millisecond's live ones. */
const GROUP_SLACK = 64;
/** An ack put off by consume() waits at most this long, or half the visibility timeout. */
const MAX_ACK_DELAY_MS = 1000;

export class NearHorizon implements HeldCounts {
  readonly payloads: PayloadBudget;
  private readonly ready = new Map<string, ReadyList<NearMessage>>();
  private readonly ids = new HeldIds(() => this.ready.size > 0);
  /** The lease take() made last: a take with the same deadline joins it while it runs. */
  private lastLease: Lease | undefined;
  /**
   * The last ready list dropped empty (up to SPARE_READY_CAPACITY), for the next topic: a
   * consumer that keeps up empties its list again and again, and each new one grew from 16.
   */
  private spareReady: ReadyList<NearMessage> | undefined;
  private readonly receipts = new Receipts<NearMessage>();
  readonly tallies = new Map<string, HeldTally>();
  readonly minutes = new Map<number, number>();
  readonly due: DueCounts;
  /**
   * Messages held during a horizon load, to arm after it, with their versions when held: one
   * held twice during the load is armed once, by its last entry (two due timers fired it early).
   */
  private deferred: NearMessage[] | undefined;
  private deferredVersions: number[] = [];
  private superseded: Set<string> | undefined;
  /**
   * fireTime(): the reading, and how many more fires may use it. It starts as a fraction: a
   * small-integer field that later takes a fraction changes representation, and V8 deoptimises.
   */
  private fireReading = Number.NaN;
  private fireReads = 0;
  /** Payloads of dense bursts parsed before they are due; a delivery takes its payload here. */
  readonly ahead: DecodeAhead;
  /** The due groups of dense milliseconds not fired yet, by due time. */
  private readonly groups = new Map<number, DueGroup>();
  /**
   * Messages of one millisecond from which they share a due group (one wheel timer; each
   * fired through the wheel on its own cost ~4 µs in a first burst), and from which their
   * payloads are decoded ahead. Settings for tests.
   */
  static groupFrom = 64;
  static denseFrom = DENSE_PER_MS;
  /** When a take last left ready messages of its topic behind (see BEHIND_MS). */
  private behindAt = -Infinity;

  constructor(
    private readonly clock: Clock,
    private readonly wheel: TimerWheel<NearMessage | Lease | DueGroup>,
    private readonly report: QueueReport,
    private readonly waiters: Waiters,
    /** Payload bytes held in memory at most (PayloadBudget). */
    payloadLimit: number,
  ) {
    this.payloads = new PayloadBudget(payloadLimit);
    this.due = new DueCounts(Math.floor(clock.now()));
    this.ahead = new DecodeAhead(
      wheel,
      () => clock.now(),
      () => this.clock.now() - this.behindAt < BEHIND_MS,
    );
  }

  get size(): number {
    return this.ids.count;
  }

  /**
   * Every held message, in no particular order, but those whose ack consume() put off (their
   * handler succeeded: they are as good as acked). Synchronous: read it in one turn.
   */
  *heldMessages(): IterableIterator<NearMessage> {
    for (const message of this.ids.held()) {
      if (message.pendingAck === undefined) yield message;
    }
  }

  /**
   * The held message of an id. One whose ack consume() put off is finished first: to cancel(),
   * get() and the rest it is acked, as it would be had the ack not waited.
   */
  get(id: string): NearMessage | undefined {
    const message = this.ids.entry(id);
    if (message === undefined || !message.held) return undefined;
    if (message.pendingAck !== undefined) {
      this.applyPendingAck(message);
      if (!message.held) return undefined;
    }
    return message;
  }

  /** The held message of an id while it waits (scheduled or ready, not in flight). */
  resting(id: string): NearMessage | undefined {
    const message = this.ids.entry(id);
    return message?.held === true && message.status !== 'inflight' ? message : undefined;
  }

  /** Set by Deliveries. */
  applyPendingAck: (message: NearMessage) => void = () => {};

  /** The message in flight under this receipt, if any (the facade checked it is a string). */
  owner(receipt: string): NearMessage | undefined {
    const message = this.receipts.owner(receipt);
    // Acked, its ack put off (deliveries.ts): that delivery has ended, as if the ack were applied.
    return message?.pendingAck === undefined ? message : undefined;
  }

  receiptOf(message: NearMessage): string {
    return this.receipts.receiptOf(message);
  }

  /** In no particular order. */
  inFlight(): NearMessage[] {
    return this.receipts.holders();
  }

  /**
   * Brings a message into memory as scheduled (one already held under its id is left as it is).
   * `fresh`: just scheduled with a new id, so it cannot be held already (no lookup).
   */
  hold(state: MessageState, fresh = false): void {
    if (!fresh && this.ids.entry(state.id)?.held === true) return;
    // A message from the store gets an object of the queue's own shape, all fields set at once:
    // adding them one by one to the store's object would leave every message loaded from disk
    // with a different hidden class (slow in every hot path after this).
    const message = 'held' in state ? (state as NearMessage) : nearMessage(state);
    message.status = 'scheduled';
    message.receiptNo = 0;
    message.lease = undefined;
    message.version++;
    message.slot = -1;
    message.budgeted = this.payloads.admit(message);
    this.ids.add(message);
    message.held = true;
    let tally = this.tallies.get(message.topic);
    if (tally === undefined)
      this.tallies.set(
        message.topic,
        (tally = { ready: 0, inflight: 0, scheduled: 0, receivedInLook: -1 }),
      );
    message.tally = tally;
    tally.scheduled++;
    bump(this.minutes, Math.floor(message.deliverAt / MINUTE_MS), 1);
    this.due.add(message.deliverAt, 1);
    if (this.deferred !== undefined) {
      this.deferred.push(message);
      this.deferredVersions.push(message.version);
    } else this.arm(message);
  }

  /**
   * Due already: ready at once, after whatever the wheel holds that is due by now (ticks begin
   * on whole milliseconds, so its tick has begun: due order holds), unless the wheel is
   * mid-expiration: then on its next tick, or in its group if that has not fired. Not due yet: a
   * timer, or a place in its millisecond's due group from groupFrom messages on. A group takes
   * every message of its millisecond armed until it fires, however few are left: a message armed
   * later never fires before one armed earlier for the same time.
   */
  private arm(message: NearMessage): void {
    const now = this.clock.now();
    const at = message.deliverAt;
    if (at <= now) {
      this.wheel.runDue();
      if (!this.wheel.expiring) {
        this.fire(message, now);
        return;
      }
    }
    let group = this.groups.size === 0 ? undefined : this.groups.get(at);
    if (group === undefined) {
      if (this.due.at(at) < NearHorizon.groupFrom) {
        message.timer = this.wheel.scheduleAt(at, message);
        return;
      }
      group = new DueGroup(at);
      this.wheel.scheduleAt(at, group); // never cleared: it fires, if only to find nothing
      this.groups.set(at, group);
    }
    message.timer = undefined;
    if (group.messages.length >= 2 * this.due.at(at) + GROUP_SLACK) group.compact();
    group.messages.push(message);
    group.versions.push(message.version);
    if (this.due.at(at) >= NearHorizon.denseFrom) this.ahead.note(message);
  }

  /**
   * A busy millisecond came due: its unchanged messages fire in order, as fire() would, but with
   * one clock reading, one count change and one wake per run of a topic.
   */
  fireGroup(group: DueGroup): void {
    const { deliverAt, messages, versions } = group;
    if (this.groups.get(deliverAt) === group) this.groups.delete(deliverAt);
    group.messages = [];
    group.versions = [];
    const now = Math.max(this.clock.now(), deliverAt);
    let fired = 0;
    let topic = '';
    let run = 0;
    let list: ReadyList<NearMessage> | undefined;
    for (let i = 0; i < messages.length; i++) {
      const message = messages[i];
      if (message.version !== versions[i]) continue;
      if (DEBUG)
        assert(message.held && message.status === 'scheduled', 'fired a message not scheduled');
      this.report.fired(message, now);
      message.status = 'ready';
      message.version++;
      const tally = message.tally as HeldTally;
      tally.ready++;
      tally.scheduled--;
      if (list === undefined || message.topic !== topic) {
        if (run > 0) this.waiters.wake(topic, run);
        topic = message.topic;
        run = 0;
        list = this.readyListOf(topic);
      }
      if (list.full) list.reserve(1 + Math.min(messages.length - i - 1, tally.scheduled));
      list.push(message);
      run++;
      fired++;
    }
    if (run > 0) this.waiters.wake(topic, run);
    if (fired > 0) this.due.add(deliverAt, -fired);
  }

  /** A scheduled message came due; `now`: a clock reading taken after that, if the caller has one. */
  fire(message: NearMessage, now = this.fireTime(message)): void {
    if (DEBUG)
      assert(message.held && message.status === 'scheduled', 'fired a message not scheduled');
    this.report.fired(message, now);
    message.status = 'ready';
    message.version++;
    this.due.add(message.deliverAt, -1);
    const tally = message.tally as HeldTally;
    tally.ready++;
    tally.scheduled--;
    const list = this.readyListOf(message.topic);
    // Full: room for the rest of its millisecond too (a burst fires them next), in one grow
    // rather than one doubling after another: those still scheduled for that millisecond, and
    // no more than the topic still has scheduled (a burst over many topics is counted whole).
    if (list.full) {
      list.reserve(1 + Math.min(this.due.at(message.deliverAt), tally.scheduled));
    }
    list.push(message);
    this.waiters.wake(message.topic, 1);
  }

  /** A topic's ready list, made when it has none (the spare one if there is one). */
  private readyListOf(topic: string): ReadyList<NearMessage> {
    let list = this.ready.get(topic);
    if (list === undefined) {
      list = this.spareReady ?? new ReadyList<NearMessage>();
      this.spareReady = undefined;
      this.ready.set(topic, list);
    }
    return list;
  }

  /**
   * The time fire() measures lateness at (stats only): one clock reading serves up to
   * FIRE_READS fires of one synchronous run, instead of a reading each (~45 ns, a tenth of the
   * cost of making a message ready); never before the message's due time (a reading from an
   * earlier expiry of the same run could be).
   */
  private fireTime(message: NearMessage): number {
    if (this.fireReads === 0) {
      this.fireReading = this.clock.now();
      queueMicrotask(this.endFireRun);
    }
    this.fireReads = this.fireReads === 0 ? FIRE_READS - 1 : this.fireReads - 1;
    return Math.max(this.fireReading, message.deliverAt);
  }

  private readonly endFireRun = (): void => {
    this.fireReads = 0;
  };

  /**
   * Takes up to `max` ready messages of a topic in flight (due ones included), stopping before one
   * whose payload (if in memory) would bring the total past `maxBytes`; the first is always taken.
   */
  take(topic: string, max: number, visibilityMs: number, maxBytes: number): NearMessage[] {
    // Whatever is due by now is ready first, even if the wheel's native timer has not run yet.
    this.wheel.runDue();
    const list = this.ready.get(topic);
    if (list === undefined) return [];
    // Made at its largest possible length and cut to what was taken (stale entries are skipped,
    // maxBytes may stop it): grown push by push it was copied several times a take.
    const taken = new Array<NearMessage>(Math.min(max, list.length));
    let count = 0;
    let bytes = 0;
    let exact = false;
    while (count < taken.length) {
      const message = list.peekCurrent();
      if (message === undefined) break;
      if (message.status !== 'ready' || !message.held) {
        list.dropHead();
        continue;
      }
      // A text payload's UTF-8 length is at most 3 bytes a UTF-16 unit: `bytes` is that bound
      // until it would pass maxBytes, and is counted exactly from there on.
      const text = message.payloadText;
      let size =
        text === undefined
          ? (message.payload?.byteLength ?? 0)
          : exact
            ? storedBytes(text)
            : 3 * text.length;
      if (!exact && bytes + size > maxBytes) {
        exact = true;
        bytes = 0;
        for (let i = 0; i < count; i++) bytes += heldBytes(taken[i]);
        size = heldBytes(message);
      }
      bytes += size;
      if (count > 0 && bytes > maxBytes) break;
      list.dropHead();
      message.status = 'inflight';
      message.version++;
      const tally = message.tally as HeldTally;
      tally.ready--;
      tally.inflight++;
      message.attempts++;
      this.receipts.issue(message);
      taken[count++] = message;
    }
    if (count < taken.length) taken.length = count;
    if (count > 0) {
      const now = this.clock.now();
      const expiresAt = Math.ceil(now + visibilityMs);
      let lease = this.lastLease;
      if (lease === undefined || lease.timer === 0 || lease.expiresAt !== expiresAt) {
        lease = this.lastLease = new Lease(expiresAt);
        lease.timer = this.wheel.scheduleAt(expiresAt, lease);
        lease.ackBy = now + Math.min(MAX_ACK_DELAY_MS, visibilityMs / 2);
      }
      for (let i = 0; i < taken.length; i++) taken[i].lease = lease;
      lease.takes.push(taken);
      lease.entries += taken.length;
      lease.live += taken.length;
      // Its consumer took what it could and more is ready: consumers are behind.
      if ((taken[0].tally as HeldTally).ready > 0) this.behindAt = now;
    }
    // Nothing of the topic ready any more: what the list still holds is stale.
    if (list.length === 0 || (count > 0 && (taken[0].tally as HeldTally).ready === 0)) {
      this.dropReady(topic, list);
    }
    return taken;
  }

  /** A topic's ready list, none of whose entries is current, leaves the map. */
  private dropReady(topic: string, list: ReadyList<NearMessage>): void {
    if (DEBUG) assert(!(this.tallies.get(topic)?.ready ?? 0), 'dropped a ready list in use');
    this.ready.delete(topic);
    if (list.length === 0 && list.capacity <= SPARE_READY_CAPACITY) this.spareReady = list;
    // The sweep put off while ready messages waited may start now.
    if (this.ready.size === 0) this.ids.readyDrained();
  }

  /**
   * Undoes take() for `taken[from..]`: ready again at the head of their topic, in their order,
   * the attempt not counted; one whose receipt changed meanwhile is left as it is.
   */
  handBack(
    topic: string,
    taken: readonly NearMessage[],
    receipts: readonly number[],
    from: number,
  ): void {
    const back: NearMessage[] = [];
    for (let i = from; i < taken.length; i++) {
      const message = taken[i];
      if (message.receiptNo !== receipts[i] || message.status !== 'inflight') continue;
      this.leave(message);
      this.receipts.release(message);
      message.status = 'ready';
      message.version++;
      const tally = message.tally as HeldTally;
      tally.inflight--;
      tally.ready++;
      message.attempts--;
      back.push(message);
    }
    if (back.length === 0) return;
    this.readyListOf(topic).putBack(back);
    this.waiters.wake(topic, 1);
  }

  /** Takes a message out of memory, whatever its state, and ends its lateness tracking. */
  release(message: NearMessage): void {
    if (message.timer !== undefined) this.wheel.clearTimeout(message.timer);
    message.timer = undefined;
    message.pendingAck = undefined;
    this.ahead.forget(message);
    this.leave(message);
    this.receipts.release(message);
    message.version++;
    this.report.forgetLate(message.id);
    if (!message.held) return;
    message.held = false;
    this.payloads.free(message.budgeted);
    message.budgeted = 0;
    this.ids.released(message);
    // A horizon load running now may hand over a copy of it read before this change (an index
    // window read again): that copy is stale and must not be taken over.
    this.superseded?.add(message.id);
    bump(this.minutes, Math.floor(message.deliverAt / MINUTE_MS), -1);
    const tally = message.tally as HeldTally;
    if (message.status === 'scheduled') {
      this.due.add(message.deliverAt, -1);
      tally.scheduled--;
    } else if (message.status === 'ready') {
      if (--tally.ready === 0) {
        const list = this.ready.get(message.topic);
        if (list !== undefined) this.dropReady(message.topic, list);
      }
    } else tally.inflight--;
    message.tally = undefined;
    if (tally.scheduled + tally.ready + tally.inflight === 0) {
      if (DEBUG)
        assert(!this.ready.has(message.topic), 'a topic without messages kept a ready list');
      this.tallies.delete(message.topic);
    }
  }

  /** A message leaves flight: out of its lease, whose timer goes once no message is left. */
  private leave(message: NearMessage): void {
    const lease = message.lease;
    if (lease === undefined) return;
    message.lease = undefined;
    const live = --lease.live;
    if (live === 0) {
      if (lease.timer !== 0) {
        this.wheel.clearTimeout(lease.timer);
        lease.timer = 0;
      }
      lease.takes = [];
      lease.entries = 0;
    } else if (live * 4 < lease.entries && lease.entries >= 16) {
      lease.takes = [lease.members()];
      lease.entries = live;
    }
  }

  /** A lease's timer ran out: its messages still in flight under it, in take order, leave it. */
  expired(lease: Lease): NearMessage[] {
    lease.timer = 0;
    const expired = lease.members();
    for (const message of expired) message.lease = undefined;
    lease.live = 0;
    lease.takes = [];
    lease.entries = 0;
    return expired;
  }

  /** A message not held was changed through the store: a load running now must not take it. */
  supersede(id: string): void {
    this.superseded?.add(id);
  }

  /** A horizon load starts: messages held from now on are armed only at endLoad(). */
  beginLoad(): void {
    debugAssert(this.deferred === undefined, 'two horizon loads at once');
    this.deferred = [];
    this.deferredVersions = [];
    this.superseded = new Set();
  }

  /**
   * A horizon load ended: holds what it `loaded` (unless changed meanwhile), then arms the
   * messages held during it; `keep` false (the queue closed) drops both.
   */
  endLoad(loaded: readonly MessageState[], keep: boolean): void {
    const deferred = this.deferred as NearMessage[];
    const versions = this.deferredVersions;
    const superseded = this.superseded as Set<string>;
    this.deferred = undefined;
    this.deferredVersions = [];
    this.superseded = undefined;
    if (!keep) return;
    for (const message of loaded) if (!superseded.has(message.id)) this.hold(message);
    for (let i = 0; i < deferred.length; i++) {
      // Unchanged since it was held (a change of state bumps the version): still held, still
      // scheduled, and this is its last entry.
      if (deferred[i].version === versions[i]) this.arm(deferred[i]);
    }
  }
}
