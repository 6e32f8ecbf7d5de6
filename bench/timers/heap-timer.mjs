/**
 * The binary-heap peer: Varghese & Lauck's scheme 3 (timers in a priority queue ordered by
 * deadline), which is also the JDK's DelayQueue and ScheduledThreadPoolExecutor design. The heap
 * is heap-js from npm; one native setTimeout is armed for the earliest deadline.
 *
 * Cancellation is lazy, as in Python's asyncio and in the JDK's ScheduledThreadPoolExecutor with
 * its default removeOnCancel=false: a cancelled entry is only marked and stays in the heap until
 * it reaches the top or until cancelled entries are the majority, when the heap is rebuilt
 * without them (asyncio's policy). heap-js's own remove() is a linear search, and the JDK's
 * DelayQueue.remove() is one too: at a million timers, cancelling them all that way would take
 * hours, and no one runs a heap timer like that.
 *
 * Like tickwheel it never fires early (deadlines are checked against performance.now()), it
 * fires in bounded batches with setImmediate in between, and equal deadlines fire in the order
 * they were scheduled. Unlike tickwheel's SystemClock it does not spin on setImmediate when the
 * native timer wakes a fraction of a millisecond early: it sleeps another millisecond.
 */

import { Heap } from 'heap-js';

const PENDING = 0;
const CANCELLED = 1;
const FIRED = 2;

/** A timer: what the heap holds and what schedule() returns as the handle. */
class HeapEntry {
  constructor(deadline, seq, delay, data) {
    this.deadline = deadline;
    this.seq = seq;
    this.delay = delay;
    this.data = data;
    this.state = PENDING;
  }
}

function byDeadline(a, b) {
  return a.deadline - b.deadline || a.seq - b.seq;
}

/** Heaps smaller than this are never rebuilt: the garbage is not worth the pass. */
const COMPACT_MIN = 100;

export class HeapTimer {
  /**
   * @param {{ onExpire: (data: unknown) => void, maxBatch?: number }} options
   */
  constructor({ onExpire, maxBatch = 10_000 }) {
    this.onExpire = onExpire;
    this.maxBatch = maxBatch;
    this.heap = new Heap(byDeadline);
    this.seq = 0;
    this.live = 0;
    this.cancelled = 0;
    this.timer = undefined;
    this.immediate = undefined;
    this.armedFor = Infinity;
    /** True while fire() runs: it arms the native timer once when it is done. */
    this.firing = false;
    this.onNative = () => this.fire();
  }

  get size() {
    return this.live;
  }

  /** `onExpire(data)` runs `delay` ms from now. Returns the entry, which is the handle. */
  schedule(delay, data) {
    const entry = new HeapEntry(performance.now() + delay, this.seq++, delay, data);
    this.heap.add(entry);
    this.live++;
    if (!this.firing && entry.deadline < this.armedFor) this.arm(entry.deadline);
    return entry;
  }

  cancel(entry) {
    if (entry.state !== PENDING) return false;
    entry.state = CANCELLED;
    entry.data = undefined;
    this.live--;
    this.cancelled++;
    if (this.cancelled > COMPACT_MIN && this.cancelled * 2 > this.heap.length) this.compact();
    return true;
  }

  /** Re-arms a pending timer with its own delay: a new entry, the old one cancelled. */
  refresh(entry) {
    const data = entry.data;
    this.cancel(entry);
    return this.schedule(entry.delay, data);
  }

  close() {
    this.disarm();
    this.heap.clear();
    this.live = 0;
    this.cancelled = 0;
  }

  /** Rebuilds the heap from its live entries in O(n) (heapify). */
  compact() {
    const heap = this.heap;
    heap.heapArray = heap.heapArray.filter((entry) => entry.state === PENDING);
    heap.init();
    this.cancelled = 0;
  }

  fire() {
    this.timer = undefined;
    this.immediate = undefined;
    this.armedFor = Infinity;
    const heap = this.heap;
    const now = performance.now();
    this.firing = true;
    try {
      let ran = 0;
      while (ran < this.maxBatch) {
        const top = heap.peek();
        if (top === undefined || top.deadline > now) break;
        heap.pop();
        if (top.state === CANCELLED) {
          this.cancelled--;
          continue;
        }
        top.state = FIRED;
        this.live--;
        ran++;
        this.onExpire(top.data);
      }
    } finally {
      this.firing = false;
      this.rearm();
    }
  }

  rearm() {
    while (this.heap.length > 0 && this.heap.peek().state === CANCELLED) {
      this.heap.pop();
      this.cancelled--;
    }
    const top = this.heap.peek();
    if (top !== undefined) this.arm(top.deadline);
  }

  arm(deadline) {
    this.disarm();
    this.armedFor = deadline;
    const delay = deadline - performance.now();
    // Due already (a batch left work): after I/O has had its turn. Otherwise a native timer,
    // which runs on the loop's cached millisecond clock and may wake a fraction of a millisecond
    // early; fire() then finds nothing due and waits one more millisecond, never firing early.
    if (delay <= 0) this.immediate = setImmediate(this.onNative);
    else this.timer = setTimeout(this.onNative, Math.max(1, Math.ceil(delay)));
  }

  disarm() {
    if (this.timer !== undefined) clearTimeout(this.timer);
    if (this.immediate !== undefined) clearImmediate(this.immediate);
    this.timer = undefined;
    this.immediate = undefined;
    this.armedFor = Infinity;
  }
}
