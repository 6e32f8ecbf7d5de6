/**
 * One waiter at a time, woken by wake(), after a time, or when a signal aborts. Node's own
 * timers: fake timers installed by a test must not hold a stream up.
 */

import { clearTimeout, setTimeout } from 'node:timers';

export class Wake {
  private waiter: (() => void) | undefined;

  /** Ends the wait under way, if any. */
  wake(): void {
    this.waiter?.();
  }

  /** Resolves on wake(), after `ms`, or once `signal` aborts, whichever comes first. */
  wait(ms: number, signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.waiter = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener('abort', done, { once: true });
      this.waiter = done;
    });
  }
}
