/**
 * What a node does for a partition it owns (docs/cluster.md, "The near horizon"): its messages
 * due before `loadedUntil` in the node's wheel, fired when due, deliveries past their visibility
 * failed; each change an owner-only call carrying its epoch (refused: the owner stops). Loading
 * order, so that no message is missed: load raises loadedUntil first (schedules below it go
 * to the near segment, freezing those windows), then the frozen windows are read, then the near
 * segments' tails (on a notification, or every `pollMs`: notifications can be lost). The poll
 * also lists the near segments with live records: one this owner never read is a bug, reported
 * (ERR_TICKWHEEL_ASSERTION) and read. A wheel entry names one scheduling (segment and index); a
 * fire checks it still holds.
 */

import { TickwheelAssertionError } from '../assert.js';
import type { EventSource } from '../queue/events.js';
import { retryDelay } from '../queue/message.js';
import type { TimerHandle, TimerWheel } from '../timer/index.js';
import type { PartitionDriver, Placed } from './driver.js';
import { decodeRecord, placeOf } from './record.js';
import type { NodeFires } from './node-fires.js';
import { turnBatches } from './gated-batches.js';

export interface Due extends Placed {
  owner: PartitionOwner;
}

export interface PartitionOwnerOptions {
  partition: number;
  partitions: number;
  node: string;
  epoch: number;
  windowMs: number;
  horizonMs: number;
  /** How far ahead of the store's clock a fire may be (the fire's skew bound). */
  maxClockSkewMs: number;
  /** How far ahead of its due time a message is fired (the store's takes wait for the due time). */
  fireAheadMs: number;
  /** Near segments re-read and overdue deliveries looked for this often, notified or not. */
  pollMs: number;
  /** Near segments listed (to find one never read) this often (default 10 s; at least pollMs). */
  relistMs?: number;
  /** The node's wheel, on an epoch clock, whose onExpire hands a Due to `fire`. */
  wheel: TimerWheel<Due>;
  /** Called once when an owner-only call is refused: the partition is someone else's now. */
  onFenced: (owner: PartitionOwner) => void;
  /** Called once when writes this owner saw answered are gone (lost in a failover). */
  onStale: (owner: PartitionOwner) => void;
  /** Errors of background work; the owner carries on. */
  onError: (err: unknown) => void;
  /** A delivery whose visibility ran out: due again at `deliverAt`, or dead (its last due time). */
  onExpired?: ((message: EventSource, settled: 'failed' | 'dead') => void) | undefined;
  onFired?: ((count: number) => void) | undefined;
  /** The node's fires of every partition, when the store takes several in one call. */
  fires?: NodeFires | undefined;
}

/** Records read per read call. */
const READ_BATCH = 2_000;
/** Overdue deliveries expired per expire call. */
const OVERDUE_BATCH = 500;
/** A new near segment this often, so that old ones can go. */
const ROTATE_EVERY_MS = 60_000;
/** The near segments with live records are listed this often by default (relistNear). */
const RELIST_MS = 10_000;

export class PartitionOwner {
  readonly partition: number;
  readonly epoch: number;
  private readonly timers = new Map<string, TimerHandle>();
  /** Near segment -> records read so far. */
  private readonly nearRead = new Map<string, number>();
  /** Near segments rotated out and read to their end. */
  private readonly nearDone = new Set<string>();
  private loadedUntil = 0;
  private currentNear = '';
  private lastRotation = Date.now();
  private stopped = false;
  private readonly fires = turnBatches<0, Due>((_, batch) => void this.flushFires(batch));
  private readonly nearReads = new OneAtATime(
    () => this.readNear(),
    (err) => this.options.onError(err),
  );
  private readonly relisting = new OneAtATime(
    () => this.relistNear(),
    (err) => this.options.onError(err),
  );
  private readonly expiry = new OneAtATime(
    async () => {
      if (this.stopped) return;
      await this.expireOverdue();
      await this.armVisibility();
    },
    (err) => this.options.onError(err),
  );
  private poll: NodeJS.Timeout | undefined;
  /** Runs when the partition's earliest visibility deadline passes. */
  private visibility: NodeJS.Timeout | undefined;
  /** When `visibility` runs (the store's time), Infinity when not armed. */
  private visibilityAt = Infinity;
  /** The highest owner-write count (`seq`) answered so far. */
  private seenSeq = 0;

  constructor(
    private readonly driver: PartitionDriver,
    private readonly options: PartitionOwnerOptions,
  ) {
    this.partition = options.partition;
    this.epoch = options.epoch;
  }

  get active(): boolean {
    return !this.stopped;
  }

  /** Loads the near horizon; resolves once every message due before loadedUntil is armed. */
  async start(): Promise<void> {
    await this.advance();
    // Deliveries a former owner left in flight: failed at once if overdue, else timed.
    this.onInflightChanged();
    const relistEvery = Math.max(
      1,
      Math.round((this.options.relistMs ?? RELIST_MS) / this.options.pollMs),
    );
    let polls = 0;
    const poll = () => {
      this.onNearChanged();
      this.onInflightChanged();
      if (++polls % relistEvery === 0 && !this.stopped) this.relisting.run();
    };
    // Each owner at its own phase: a node's owners, started together, would otherwise poll
    // together, and their calls at once would hold every pooled connection (PostgreSQL).
    this.poll = setTimeout(() => {
      if (this.stopped) return;
      this.poll = setInterval(poll, this.options.pollMs);
      this.poll.unref();
      poll();
    }, Math.random() * this.options.pollMs);
    this.poll.unref();
  }

  /** Moves loadedUntil up to the window holding now + horizon, and loads what that froze. */
  async advance(): Promise<void> {
    if (this.stopped) return;
    const { windowMs, horizonMs } = this.options;
    const want = (Math.floor((Date.now() + horizonMs) / windowMs) + 1) * windowMs;
    const rotate = Date.now() - this.lastRotation >= ROTATE_EVERY_MS || this.currentNear === '';
    const previous = this.loadedUntil;
    const floor = this.seen;
    const loaded = await this.driver.load(this.partition, this.options, want, rotate);
    if (loaded === undefined) return this.fenced();
    if (!this.saw(loaded.seq, floor)) return;
    if (rotate) this.lastRotation = Date.now();
    this.loadedUntil = loaded.loadedUntil;
    this.currentNear = loaded.near;
    // The first load: the near segments with live records are listed after it, not before: a
    // schedule into a former owner's segment that commits in between is then listed too (the
    // load started a new one, so none is written to the former ones after it).
    if (previous === 0) {
      for (const seg of await this.driver.nearSegments(this.partition)) {
        if (!this.nearRead.has(seg)) this.nearRead.set(seg, 0);
      }
    }
    if (!this.nearRead.has(this.currentNear)) this.nearRead.set(this.currentNear, 0);
    // Windows frozen by this call (all of them on the first): read them whole.
    const windows = await this.driver.windows(
      this.partition,
      previous === 0 ? -Infinity : Math.floor(previous / windowMs),
      Math.floor(this.loadedUntil / windowMs),
    );
    for (const segment of windows) await this.readSegment(`w${segment}`, 0);
    await this.readNear();
  }

  /** A notification (or the poll): read the near segments' new tails. */
  onNearChanged(): void {
    if (!this.stopped) this.nearReads.run();
  }

  /** Fails the deliveries past their visibility (by the store's clock), then arms the next. */
  onInflightChanged(): void {
    if (!this.stopped) this.expiry.run();
  }

  /** Deliveries were taken, visible again at `deadline` (the store's time): no call needed. */
  onTaken(deadline: number): void {
    if (!Number.isFinite(deadline)) return this.onInflightChanged();
    if (deadline < this.visibilityAt) this.setVisibilityTimer(deadline);
  }

  private async armVisibility(): Promise<void> {
    this.setVisibilityTimer(await this.driver.earliestVisibility(this.partition));
  }

  /** The visibility timer runs at `at` (Infinity: not at all). */
  private setVisibilityTimer(at: number): void {
    if (this.visibility !== undefined) clearTimeout(this.visibility);
    this.visibility = undefined;
    this.visibilityAt = Infinity;
    if (this.stopped || at === Infinity) return;
    // Past by this node's clock but not by the store's (a clock ahead): try again shortly.
    const wait = at - Date.now();
    this.visibilityAt = at;
    this.visibility = setTimeout(
      () => {
        this.setVisibilityTimer(Infinity);
        this.onInflightChanged();
      },
      wait > 0 ? Math.min(wait + 1, 2 ** 31 - 1) : 25,
    );
    this.visibility.unref();
  }

  private async expireOverdue(): Promise<void> {
    const rows = await this.driver.overdue(this.partition, Date.now(), OVERDUE_BATCH);
    if (rows.length === 0 || this.stopped) return;
    // A full batch: more may be overdue, so one more run follows this one.
    if (rows.length === OVERDUE_BATCH) this.expiry.run();
    const now = Date.now();
    const retries = rows.map(({ id, bucket, attempts, record }) => {
      const { backoff, topic, trace } = decodeRecord(record);
      const due = now + retryDelay(backoff, attempts);
      const window = Math.floor(due / this.options.windowMs);
      return { id, bucket, attempt: attempts, due, window, topic, trace };
    });
    const floor = this.seen;
    const expired = await this.driver.expire(this.partition, this.options, retries);
    if (expired === undefined) return this.fenced();
    // Reported even when saw() finds writes lost: this call's own were applied.
    this.saw(expired.seq, floor);
    expired.outcomes.forEach((outcome, i) => {
      const { id, topic, attempt, due, trace } = retries[i];
      const message = { id, topic, attempts: attempt };
      if (outcome === 'retried') this.options.onExpired?.({ ...message, deliverAt: due }, 'failed');
      else if (outcome === 'dead') {
        // A dead letter's deliverAt is the due time of its last delivery.
        this.options.onExpired?.({ ...message, deliverAt: rows[i].deliverAt, trace }, 'dead');
      }
    });
  }

  /** Fires `due` with the others of this turn. */
  fire(due: Due): void {
    this.timers.delete(due.id);
    if (this.stopped) return;
    if (this.options.fires !== undefined) this.options.fires.add(this, due);
    else this.fires.add(0, due);
  }

  /** Stops at once: forgets every timer; nothing more is sent for this partition. */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    if (this.poll !== undefined) clearTimeout(this.poll);
    if (this.visibility !== undefined) clearTimeout(this.visibility);
    for (const handle of this.timers.values()) this.options.wheel.clearTimeout(handle);
    this.timers.clear();
  }

  /** An event of the partition for its owner (driver.ts, "Events"). */
  onEvent(message: string): void {
    if (message === 'n') this.onNearChanged();
    else if (message.startsWith('n ')) this.onNearScheduled(message);
    else if (message.startsWith('i ')) this.onTaken(Number(message.slice(2)));
    else if (message === 'i') this.onInflightChanged();
  }

  /** A schedule's note of its near appends: armed with no call if it follows what was read. */
  onNearScheduled(note: string): void {
    if (this.stopped) return;
    const parts = note.split(' ');
    const seg = parts[1];
    let index = Number(parts[2]);
    if (this.nearReads.running !== undefined || this.nearRead.get(seg) !== index) {
      this.onNearChanged();
      return;
    }
    for (let k = 3; k + 2 < parts.length; k += 3) {
      const id = parts[k];
      const bucket = parts[k + 1] === '-' ? this.bucketOf(id) : Number(parts[k + 1]);
      const due: Due = { owner: this, id, bucket, seg, index };
      this.arm(due, Number(parts[k + 2]) - this.options.fireAheadMs);
      index++;
    }
    this.nearRead.set(seg, index);
  }

  /** Reads the near segments' tails; one rotated out (no more appends) is read to its end once. */
  private async readNear(): Promise<void> {
    const current = this.currentNear;
    for (const [seg, from] of this.nearRead) {
      await this.readSegment(seg, from);
      if (current !== '' && seg !== current && !this.stopped) {
        this.nearRead.delete(seg);
        this.nearDone.add(seg);
      }
    }
  }

  /**
   * Lists the near segments with live records: every one older than the current near segment
   * must be one this owner reads or has read (the first load lists them all, later ones are
   * its own). One that is not would hold messages that never fire: said, and read.
   */
  private async relistNear(): Promise<void> {
    const current = this.currentNear;
    if (this.stopped || current === '') return;
    const known = [...this.nearDone];
    const listed = new Set(await this.driver.nearSegments(this.partition));
    if (this.stopped) return;
    // Rotated-out segments hold no new records: one not listed has nothing live any more.
    for (const seg of known) if (!listed.has(seg)) this.nearDone.delete(seg);
    const missed = [...listed].filter(
      (seg) =>
        !this.nearRead.has(seg) && !this.nearDone.has(seg) && nearNumber(seg) < nearNumber(current),
    );
    if (missed.length === 0) return;
    this.options.onError(
      new TickwheelAssertionError(
        `partition ${this.partition}: near segment(s) ${missed.join(', ')} hold live records ` +
          `this owner had not read (current: ${current}); reading them now`,
      ),
    );
    for (const seg of missed) this.nearRead.set(seg, 0);
    this.onNearChanged();
  }

  private async readSegment(seg: string, from: number): Promise<void> {
    let at = from;
    for (;;) {
      if (this.stopped) return;
      const { scanned, live } = await this.driver.read(this.partition, seg, at, READ_BATCH);
      for (const { index, status, deliverAt, id } of live) {
        if (status !== 'S') continue;
        const due = { owner: this, id, bucket: this.bucketOf(id), seg, index };
        this.arm(due, deliverAt - this.options.fireAheadMs);
      }
      at += scanned;
      if (this.nearRead.has(seg)) this.nearRead.set(seg, at);
      if (scanned < READ_BATCH) return;
    }
  }

  private bucketOf(id: string): number {
    return placeOf(id, this.options.partitions).bucket;
  }

  /** Fires `due` at `fireAt` (its due time less fireAheadMs, or a try again). */
  private arm(due: Due, fireAt: number): void {
    const previous = this.timers.get(due.id);
    if (previous !== undefined) this.options.wheel.clearTimeout(previous);
    this.timers.set(due.id, this.options.wheel.scheduleAt(fireAt, due));
  }

  private async flushFires(batch: Due[]): Promise<void> {
    if (this.stopped) return;
    try {
      const { partition, maxClockSkewMs, fireAheadMs } = this.options;
      const floor = this.seen;
      const skew = maxClockSkewMs + fireAheadMs;
      const done = await this.driver.fire(partition, this.options, skew, batch);
      this.fired(batch, done, floor);
    } catch (err) {
      this.options.onError(err);
      this.fireFailed(batch);
    }
  }

  /**
   * What a fire of `batch` answered: undefined when this owner was fenced. `floor`: `seen` when
   * the call was sent.
   */
  fired(
    batch: Due[],
    done: { fired: number; early: string[]; seq: number } | undefined,
    floor: number,
  ): void {
    if (this.stopped) return;
    if (done === undefined) return this.fenced();
    if (!this.saw(done.seq, floor)) return;
    if (done.fired > 0) this.options.onFired?.(done.fired);
    // Due by this node's clock, not yet by the store's: try again a little later.
    for (const id of done.early) {
      const d = batch.find((x) => x.id === id);
      if (d !== undefined) this.arm(d, Date.now() + this.options.maxClockSkewMs);
    }
  }

  /** A fire of `batch` failed: not known to have fired, armed again shortly (a fire skips what did). */
  fireFailed(batch: Due[]): void {
    if (this.stopped) return;
    for (const d of batch) this.arm(d, Date.now() + 100);
  }

  /** The highest owner-write count answered so far: an owner-only call's `floor` when sent. */
  get seen(): number {
    return this.seenSeq;
  }

  /**
   * False (and the owner stops, stale) when `seq` is not above `floor`, the count seen when its
   * call was sent: writes lost. A count below one seen since is no loss: over a pool two calls
   * run on two connections, and the one that drew the lower count may answer last.
   */
  private saw(seq: number, floor: number): boolean {
    if (seq > floor) {
      if (seq > this.seenSeq) this.seenSeq = seq;
      return true;
    }
    if (this.stopped) return false;
    this.stop();
    this.options.onStale(this);
    return false;
  }

  private fenced(): void {
    if (this.stopped) return;
    this.stop();
    this.options.onFenced(this);
  }
}

/**
 * Work run one at a time: asked while a run is under way, it runs once more after that run (not
 * once per ask), so every ask is followed by a whole run that started after it.
 */
class OneAtATime {
  /** Settles when no run is under way or asked for; undefined when idle. */
  running: Promise<void> | undefined;
  private again = false;

  constructor(
    private readonly work: () => Promise<void>,
    private readonly onError: (err: unknown) => void,
  ) {}

  run(): void {
    if (this.running !== undefined) this.again = true;
    else this.running = this.runs();
  }

  private async runs(): Promise<void> {
    // Marked running before the work starts, so that an ask from the work itself is kept.
    await Promise.resolve();
    do {
      this.again = false;
      await this.work().catch(this.onError);
    } while (this.again);
    this.running = undefined;
  }
}

/** The number of a near segment's name (n<number>), as both stores name them. */
function nearNumber(seg: string): number {
  return Number(seg.slice(1));
}
