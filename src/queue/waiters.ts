/**
 * Long polls waiting for a topic's next ready message, and the process keep-alive. A waiter is
 * woken by the first of: a message made ready in its topic (one waiter per message, oldest
 * first), its time limit (a timer on the queue's wheel), its AbortSignal, or the queue closing.
 * The woken receive takes whatever is ready then, which may be nothing.
 *
 * The queue's wheel is unref'd: only long polls and running consumers keep the process alive,
 * through one ref'd native interval. Invariant: `held` equals the number of waiters plus
 * running consumers, and `keepAlive` is set exactly while `held > 0`.
 */

import { debugAssert } from '../assert.js';
import type { TimerWheel } from '../timer/index.js';

interface Waiter {
  wake: () => void;
}

export class Waiters {
  private readonly byTopic = new Map<string, Set<Waiter>>();
  private held = 0;
  private keepAlive: ReturnType<typeof setInterval> | undefined;

  constructor(private readonly timers: Pick<TimerWheel<unknown>, 'setTimeout' | 'clearTimeout'>) {}

  /** Resolves when woken, after `waitMs` at the latest, or at once if `signal` is aborted. */
  wait(topic: string, waitMs: number, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.resolve();
    return new Promise<void>((resolve) => {
      let set = this.byTopic.get(topic);
      if (set === undefined) this.byTopic.set(topic, (set = new Set()));
      this.hold();
      const waiter: Waiter = {
        wake: () => {
          this.timers.clearTimeout(timer);
          signal?.removeEventListener('abort', waiter.wake);
          if (!set.delete(waiter)) return;
          this.release();
          if (set.size === 0 && this.byTopic.get(topic) === set) this.byTopic.delete(topic);
          resolve();
        },
      };
      const timer = this.timers.setTimeout(waiter.wake, waitMs);
      signal?.addEventListener('abort', waiter.wake, { once: true });
      set.add(waiter);
    });
  }

  /** Wakes the `count` oldest waiters of a topic (as many as there are; Infinity: all). */
  wake(topic: string, count: number): void {
    // Called for every message made ready: most often nobody waits (consumers are busy).
    if (this.byTopic.size === 0) return;
    const set = this.byTopic.get(topic);
    if (set === undefined) return;
    // Waking deletes the waiter from the set: a Set's iteration goes on past a deleted entry.
    for (const waiter of set) {
      waiter.wake();
      if (--count === 0) return;
    }
  }

  /** Waits `ms` on the queue's wheel (less if `signal` aborts), holding the process meanwhile. */
  sleep(ms: number, signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.resolve();
    return new Promise<void>((resolve) => {
      this.hold();
      let ended = false;
      const done = () => {
        if (ended) return;
        ended = true;
        this.timers.clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.release();
        resolve();
      };
      const timer = this.timers.setTimeout(done, ms);
      signal.addEventListener('abort', done, { once: true });
    });
  }

  wakeAll(): void {
    for (const topic of [...this.byTopic.keys()]) this.wake(topic, Infinity);
  }

  /** Keeps the process alive until the matching release(). */
  hold(): void {
    if (this.held++ === 0) this.keepAlive = setInterval(() => {}, 1 << 30);
  }

  release(): void {
    debugAssert(this.held > 0, 'the queue released a keep-alive it did not hold');
    if (--this.held === 0) {
      clearInterval(this.keepAlive);
      this.keepAlive = undefined;
    }
  }
}
