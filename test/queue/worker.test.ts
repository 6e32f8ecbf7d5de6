/**
 * The Worker that both consume()s run (src/queue/worker.ts), against an in-memory source: its
 * rules for handlers, failures, back-off, concurrency and close(), with no queue and no server.
 */

import { setImmediate as realSetImmediate } from 'node:timers';
import { afterEach, describe, expect, it, onTestFinished, vi } from 'vitest';
import { warnFault } from '../../src/queue/faults.js';
import { waitFor } from '../support/wait-for.js';
import type { ConsumeErrorContext, ReceivedMessage } from '../../src/queue/types.js';
import {
  checkConsumeOptions,
  receiveBackoff,
  Worker,
  type WorkerSettings,
  type WorkerSource,
} from '../../src/queue/worker.js';

function message(n: number, attempts = 1): ReceivedMessage {
  return { id: `m${n}`, topic: 'jobs', payload: n, deliverAt: 0, attempts, receipt: `r${n}` };
}

/**
 * Messages pushed in are received in order; a receive with none waits until some are pushed or
 * its signal aborts. Receive, ack and nack can be made to fail.
 */
class MemorySource implements WorkerSource {
  protected ready: ReceivedMessage[] = [];
  private waiting: Array<() => void> = [];
  receives: Array<{ max: number; waitMs: number; visibilityMs?: number }> = [];
  acked: string[] = [];
  nacked: Array<[string, string]> = [];
  /** Receives still to fail. */
  failReceives = 0;
  ackWith: (receipt: string) => PromiseLike<unknown> = () => Promise.resolve();
  nackWith: (receipt: string) => PromiseLike<unknown> = () => Promise.resolve();

  push(...messages: ReceivedMessage[]): void {
    this.ready.push(...messages);
    for (const wake of this.waiting.splice(0)) wake();
  }

  receive(
    _topic: string,
    options: { max: number; waitMs: number; visibilityMs?: number },
    signal: AbortSignal,
  ): Promise<ReceivedMessage[]> {
    this.receives.push(options);
    if (this.failReceives > 0) {
      this.failReceives--;
      return Promise.reject(new Error('receive failed'));
    }
    if (this.ready.length > 0 || signal.aborted) {
      return Promise.resolve(this.ready.splice(0, options.max));
    }
    return new Promise((resolve) => {
      const done = () => {
        signal.removeEventListener('abort', done);
        resolve(this.ready.splice(0, options.max));
      };
      this.waiting.push(done);
      signal.addEventListener('abort', done);
    });
  }

  ack(receipt: string): PromiseLike<unknown> {
    this.acked.push(receipt);
    return this.ackWith(receipt);
  }

  nack(receipt: string, reason: string): PromiseLike<unknown> {
    this.nacked.push([receipt, reason]);
    return this.nackWith(receipt);
  }
}

/**
 * A source in this process: receiveNow() answers with what is ready without a promise, or as
 * `answer` says (a promise of it, undefined, or a throw).
 */
class NowSource extends MemorySource {
  nowCalls = 0;
  /** What each receiveNow() was asked, copied (the worker reuses its options object). */
  nowAsked: Array<{ max: number; visibilityMs?: number }> = [];
  answer: 'sync' | 'promise' | 'none' | 'throw' = 'sync';

  receiveNow(
    topic: string,
    options: { max: number; visibilityMs?: number },
  ): ReceivedMessage[] | Promise<ReceivedMessage[]> | undefined {
    this.nowCalls++;
    this.nowAsked.push({ ...options });
    if (this.answer === 'none') return undefined;
    if (this.answer === 'throw') throw new Error('receiveNow failed');
    const taken = this.ready.splice(0, options.max);
    return this.answer === 'promise' ? Promise.resolve(taken) : taken;
  }
}

const errors: Array<[string, ConsumeErrorContext]> = [];
const workers: Worker[] = [];

function settings(options: Partial<WorkerSettings> = {}): WorkerSettings {
  return {
    concurrency: 1,
    prefetch: 0,
    visibilityMs: undefined,
    waitMs: 1000,
    onError: (err, context) => errors.push([(err as Error).message, context]),
    onFault: warnFault,
    ...options,
  };
}

function start(
  source: WorkerSource,
  handler: (message: ReceivedMessage) => Promise<void> | void,
  options: Partial<WorkerSettings> = {},
): Worker {
  const worker = new Worker(source, 'jobs', handler, settings(options));
  workers.push(worker);
  return worker;
}

/** Lets promise chains and immediates run. */
async function turns(n = 5): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve));
}

function deferred(): { promise: Promise<void>; resolve: () => void; reject: (err: Error) => void } {
  let resolve!: () => void;
  let reject!: (err: Error) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

afterEach(async () => {
  vi.useRealTimers();
  await Promise.all(workers.splice(0).map((worker) => worker.close()));
  errors.length = 0;
});

describe('Worker', () => {
  it('acks each message whose handler returns or resolves, in order of completion', async () => {
    const source = new MemorySource();
    const handled: unknown[] = [];
    start(source, async (m) => {
      handled.push(m.payload);
      if (m.payload === 2) await turns(1);
    });
    start(new MemorySource(), () => {}); // a second worker on another source stays idle
    source.push(message(1), message(2), message(3));
    await turns();
    expect(handled).toEqual([1, 2, 3]);
    expect(source.acked).toEqual(['r1', 'r2', 'r3']);
    expect(source.nacked).toEqual([]);
    expect(errors).toEqual([]);
  });

  it('passes max (the free slots), waitMs and visibilityMs to receive', async () => {
    const source = new MemorySource();
    const gate = deferred();
    start(source, () => gate.promise, { concurrency: 4, visibilityMs: 500, waitMs: 250 });
    await turns();
    source.push(message(1));
    await turns();
    expect(source.receives.slice(0, 2)).toEqual([
      { max: 4, waitMs: 250, visibilityMs: 500 },
      { max: 3, waitMs: 250, visibilityMs: 500 },
    ]);
    gate.resolve();
  });

  it('nacks a message whose handler throws or rejects, with the error as its reason, and reports it', async () => {
    const source = new MemorySource();
    start(source, (m) => {
      if (m.payload === 1) throw new TypeError('sync failure');
      return Promise.reject(new Error('async failure'));
    });
    source.push(message(1, 3), message(2));
    await turns();
    expect(source.nacked).toEqual([
      ['r1', 'TypeError: sync failure'],
      ['r2', 'Error: async failure'],
    ]);
    expect(source.acked).toEqual([]);
    expect(errors).toEqual([
      ['sync failure', { topic: 'jobs', id: 'm1', attempts: 3 }],
      ['async failure', { topic: 'jobs', id: 'm2', attempts: 1 }],
    ]);
  });

  it('runs at most `concurrency` handlers at once, and frees a slot when a handler is done, before its ack lands', async () => {
    const source = new MemorySource();
    const ackLands = deferred();
    source.ackWith = () => ackLands.promise;
    let running = 0;
    let most = 0;
    const gates = [deferred(), deferred(), deferred(), deferred()];
    start(
      source,
      async (m) => {
        running++;
        most = Math.max(most, running);
        await gates[(m.payload as number) - 1].promise;
        running--;
      },
      { concurrency: 2 },
    );
    source.push(message(1), message(2), message(3), message(4));
    await turns();
    expect(running).toBe(2);
    gates[0].resolve();
    await turns();
    // Message 1's ack has not landed, yet message 3 runs.
    expect(source.acked).toEqual(['r1']);
    expect(running).toBe(2);
    for (const gate of gates) gate.resolve();
    ackLands.resolve();
    await turns();
    expect(most).toBe(2);
    expect(source.acked).toEqual(['r1', 'r2', 'r3', 'r4']);
  });

  it('with prefetch, receives that many more ahead, runs them in order as slots free, and receives again at half', async () => {
    const source = new MemorySource();
    const gates = Array.from({ length: 12 }, () => deferred());
    const started: number[] = [];
    let running = 0;
    let most = 0;
    start(
      source,
      async (m) => {
        started.push(m.payload as number);
        most = Math.max(most, ++running);
        await gates[(m.payload as number) - 1].promise;
        running--;
      },
      { concurrency: 2, prefetch: 4 },
    );
    source.push(...Array.from({ length: 12 }, (_, i) => message(i + 1)));
    await turns();
    // One receive of concurrency + prefetch: two run, four wait in the consumer.
    expect(source.receives.map((r) => r.max)).toEqual([6]);
    expect(started).toEqual([1, 2]);
    gates[0].resolve();
    await turns();
    // A slot freed: the oldest waiting runs, three wait: no receive yet.
    expect(started).toEqual([1, 2, 3]);
    expect(source.receives).toHaveLength(1);
    gates[1].resolve();
    await turns();
    // Two waiting, half the prefetch: received again, as many as fit (six held at most).
    expect(started).toEqual([1, 2, 3, 4]);
    expect(source.receives.map((r) => r.max)).toEqual([6, 2]);
    for (const gate of gates) gate.resolve();
    await turns(10);
    expect(started).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
    expect(source.acked).toEqual(Array.from({ length: 12 }, (_, i) => `r${i + 1}`));
    expect(most).toBe(2);
  });

  it('with prefetch, close() runs the messages received ahead and waits for them', async () => {
    const source = new MemorySource();
    const gate = deferred();
    const handled: number[] = [];
    const worker = start(
      source,
      async (m) => {
        await gate.promise;
        handled.push(m.payload as number);
      },
      { concurrency: 1, prefetch: 3 },
    );
    source.push(message(1), message(2), message(3), message(4), message(5));
    await turns();
    let done = false;
    const closing = worker.close().then(() => (done = true));
    await turns();
    expect(done).toBe(false);
    gate.resolve();
    await closing;
    expect(handled).toEqual([1, 2, 3, 4]);
    expect(source.acked).toEqual(['r1', 'r2', 'r3', 'r4']);
    expect(source.receives).toHaveLength(1);
  });

  it('with prefetch and a synchronous handler, drains a backlog in order with no deep recursion', async () => {
    const source = new MemorySource();
    const handled: number[] = [];
    start(source, (m) => void handled.push(m.payload as number), {
      concurrency: 1,
      prefetch: 1000,
    });
    source.push(...Array.from({ length: 5000 }, (_, i) => message(i + 1)));
    await waitFor(() => handled.length === 5000);
    expect(handled).toEqual(Array.from({ length: 5000 }, (_, i) => i + 1));
  });

  it('with prefetch under a steady backlog, holds no more than concurrency + prefetch messages', async () => {
    const source = new MemorySource();
    let handled = 0;
    let held = 0;
    const worker = start(
      source,
      async () => {
        handled++;
        held = Math.max(held, (worker as unknown as { waiting: unknown[] }).waiting.length);
      },
      { concurrency: 2, prefetch: 10 },
    );
    // Refilled at half the prefetch, the waiting messages never run out while the backlog lasts.
    for (let i = 0; i < 20_000; i += 1000) {
      source.push(...Array.from({ length: 1000 }, (_, j) => message(i + j + 1)));
    }
    await waitFor(() => handled === 20_000, { timeoutMs: 60_000 });
    expect(held).toBeGreaterThan(0);
    expect(held).toBeLessThanOrEqual(2 * (2 + 10));
  });

  it('reports a failed ack or nack with its message, once per shared promise, and carries on', async () => {
    const source = new MemorySource();
    const batch = Promise.reject(new Error('fsync failed'));
    batch.catch(() => undefined);
    source.ackWith = () => batch; // every ack shares one failing group commit
    source.nackWith = () => Promise.reject(new Error('nack failed'));
    start(
      source,
      (m) => {
        if (m.payload === 3) throw new Error('handler failed');
      },
      { concurrency: 3 },
    );
    source.push(message(1), message(2), message(3));
    await turns();
    expect(errors).toEqual([
      ['handler failed', { topic: 'jobs', id: 'm3', attempts: 1 }],
      ['fsync failed', { topic: 'jobs', id: 'm1', attempts: 1 }],
      ['nack failed', { topic: 'jobs', id: 'm3', attempts: 1 }],
    ]);
    source.ackWith = () => Promise.resolve();
    source.push(message(4));
    await turns();
    expect(source.acked).toEqual(['r1', 'r2', 'r4']);
  });

  it('reports an ack that throws instead of returning a promise', async () => {
    const source = new MemorySource();
    source.ackWith = () => {
      throw new Error('ack threw');
    };
    start(source, () => {});
    source.push(message(1));
    await turns();
    expect(errors).toEqual([['ack threw', { topic: 'jobs', id: 'm1', attempts: 1 }]]);
  });

  it('backs off after failed receives: 100 ms doubling to 5 s, and from 100 ms again after one succeeds', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    const source = new MemorySource();
    source.failReceives = 8;
    const started = Date.now();
    const at: number[] = [];
    const receive = source.receive.bind(source);
    source.receive = (topic, options, signal) => {
      at.push(Date.now() - started);
      return receive(topic, options, signal);
    };
    start(source, () => {});
    await vi.advanceTimersByTimeAsync(20_000);
    expect(at).toEqual([0, 100, 300, 700, 1500, 3100, 6300, 11300, 16300]);
    expect(errors).toHaveLength(8);
    expect(
      errors.every(([text, context]) => text === 'receive failed' && context.id === undefined),
    ).toBe(true);
    expect(errors[0][1]).toEqual({ topic: 'jobs' });
    // A receive that succeeds resets the back-off.
    source.push(message(1));
    await vi.advanceTimersByTimeAsync(0);
    source.failReceives = 1;
    source.push(message(2));
    const before = at.length;
    await vi.advanceTimersByTimeAsync(150);
    // The failed receive, its retry 100 ms later; and, at the same instant, the next receive
    // once message 2 was handled, if that has run yet (the worker yields a real turn of the
    // event loop between deliveries, which the fake clock does not control).
    const after = at.slice(before).map((t) => t - at[before]);
    expect(after.slice(0, 2)).toEqual([0, 100]);
    expect(after.slice(2).every((t) => t === 100)).toBe(true);
    expect(receiveBackoff(0)).toBe(100);
    expect(receiveBackoff(5)).toBe(3200);
    expect(receiveBackoff(6)).toBe(5000);
    expect(receiveBackoff(2000)).toBe(5000);
  });

  it('backs off after failed receives on a loaded machine (each receive slower than a turn)', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    const yieldAfterMs = Worker.yieldAfterMs;
    Worker.yieldAfterMs = 1;
    try {
      const source = new MemorySource();
      source.failReceives = 4;
      const started = Date.now();
      const at: number[] = [];
      const receive = source.receive.bind(source);
      source.receive = (topic, options, signal) => {
        at.push(Date.now() - started);
        // Real time passes as on a busy machine: more than a turn's worth before it fails.
        const until = performance.now() + 3;
        while (performance.now() < until);
        return receive(topic, options, signal);
      };
      start(source, () => {});
      await vi.advanceTimersByTimeAsync(2_000);
      expect(at).toEqual([0, 100, 300, 700, 1500]);
    } finally {
      Worker.yieldAfterMs = yieldAfterMs;
    }
  });

  it('turns an onError that throws, even a non-Error, into a process warning, and carries on', async () => {
    const source = new MemorySource();
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    try {
      start(
        source,
        () => {
          throw new Error('handler failed');
        },
        {
          onError: () => {
            throw 42;
          },
        },
      );
      source.push(message(1));
      await turns();
      source.push(message(2));
      await turns();
    } finally {
      process.off('warning', onWarning);
    }
    expect(source.nacked.map(([receipt]) => receipt)).toEqual(['r1', 'r2']);
    expect(warnings.map((w) => w.message)).toEqual(['42', '42']);
  });

  it('close() ends a long poll at once and resolves, with nothing running', async () => {
    const source = new MemorySource();
    const worker = start(source, () => {});
    await turns();
    expect(source.receives).toHaveLength(1); // waiting for messages
    // The source never answers that receive by itself: close() resolves only by ending it.
    await worker.close();
    expect(source.receives).toHaveLength(1);
  });

  it('close() ends a back-off rest at once', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const source = new MemorySource();
    source.failReceives = 100;
    const worker = start(source, () => {});
    // Five failures, then a rest of 1.6 s. The fake clock goes in small steps with real turns
    // between: the worker may take a real setImmediate (yieldAfterMs) on a loaded machine.
    for (let ms = 0; ms < 3000 && source.receives.length < 5; ms += 10) {
      await vi.advanceTimersByTimeAsync(10);
      await turns(1);
    }
    expect(source.receives).toHaveLength(5);
    await turns(); // the fifth failure is reported and its rest begins
    let closed = false;
    const closing = worker.close().then(() => (closed = true));
    await turns(); // the fake clock stands still: only close() can end the rest
    expect(closed).toBe(true);
    await closing;
    await vi.advanceTimersByTimeAsync(10_000);
    expect(source.receives).toHaveLength(5); // no receive after close
  });

  it('close() called from onError during a failed receive ends at once', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const source = new MemorySource();
    source.failReceives = 1;
    let closing: Promise<void> | undefined;
    const worker = start(source, () => {}, {
      onError: () => {
        closing = worker.close();
      },
    });
    await turns();
    let closed = false;
    void closing?.then(() => (closed = true));
    await turns(); // the fake clock stands still: the 100 ms rest must not be taken
    expect(closed).toBe(true);
    expect(source.receives).toHaveLength(1);
  });

  it('close() waits for running handlers and for their acks, and receives no more', async () => {
    const source = new MemorySource();
    const handler = deferred();
    const ack = deferred();
    source.ackWith = () => ack.promise;
    const worker = start(source, () => handler.promise);
    source.push(message(1));
    await turns();
    let done = false;
    const closing = worker.close().then(() => (done = true));
    source.push(message(2));
    await turns();
    expect(done).toBe(false);
    handler.resolve();
    await turns();
    expect(source.acked).toEqual(['r1']);
    expect(done).toBe(false); // its ack has not landed
    ack.resolve();
    await closing;
    expect(source.acked).toEqual(['r1']);
    expect(worker.close()).toBe(worker.close()); // one close, however often called
  });

  it('warns when close() waits long for a handler, as when the handler awaits that very close()', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const source = new MemorySource();
    const escape = deferred();
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    const before = Worker.closeWarnAfterMs;
    Worker.closeWarnAfterMs = 30;
    try {
      const worker: Worker = start(source, async () => {
        // Awaiting close() alone would never end: close() waits for this handler.
        await Promise.race([worker.close(), escape.promise]);
      });
      source.push(message(1));
      await vi.advanceTimersByTimeAsync(29);
      expect(warnings).toEqual([]);
      await vi.advanceTimersByTimeAsync(1);
      await turns(); // a warning is emitted on the next tick
      expect(warnings).toHaveLength(1);
      expect(warnings[0].name).toBe('TickwheelConsumerWarning');
      expect(warnings[0].message).toMatch(
        /close\(\) of the consumer of topic jobs has waited 30 ms for 1 running handler\. A handler that awaits close\(\) of its own consumer never ends/,
      );
      escape.resolve();
      await worker.close();
      expect(source.acked).toEqual(['r1']);
      await vi.advanceTimersByTimeAsync(10_000);
      expect(warnings).toHaveLength(1); // once, and not after close() ended
    } finally {
      Worker.closeWarnAfterMs = before;
      process.off('warning', onWarning);
    }
  });

  it('takes a turn of the event loop while a backlog drains, so that I/O and timers are served', async () => {
    const source = new MemorySource();
    const n = 100_000;
    for (let i = 1; i <= n; i += 1_000) {
      source.push(...Array.from({ length: 1_000 }, (_, k) => message(i + k)));
    }
    const before = Worker.yieldAfterMs;
    Worker.yieldAfterMs = 1;
    try {
      let handled = 0;
      let done!: () => void;
      const drained = new Promise<void>((resolve) => (done = resolve));
      const worker = start(
        source,
        () => {
          if (++handled === n) done();
        },
        { concurrency: 100 },
      );
      // Queued behind the first receive: runs only when the loop lets the event loop turn.
      const seen: number[] = [];
      const immediate = () => {
        seen.push(handled);
        if (handled < n) setImmediate(immediate);
      };
      setImmediate(immediate);
      await drained;
      await worker.close();
      expect(source.acked).toHaveLength(n);
      // Served while the backlog drained, not only once it was done.
      expect(seen[0]).toBeLessThan(n);
      expect(seen.filter((count) => count < n).length).toBeGreaterThan(1);
    } finally {
      Worker.yieldAfterMs = before;
    }
  });

  it("runs what a source's receiveNow() has ready without waiting: a synchronous handler drains it in one go", async () => {
    // No turn taken for time spent (yieldAfterMs): a loaded machine must not change the count.
    const yieldAfterMs = Worker.yieldAfterMs;
    Worker.yieldAfterMs = Infinity;
    onTestFinished(() => {
      Worker.yieldAfterMs = yieldAfterMs;
    });
    const source = new NowSource();
    source.push(...Array.from({ length: 50 }, (_, i) => message(i + 1)));
    const handled: unknown[] = [];
    start(source, (m) => void handled.push(m.payload), { concurrency: 1, visibilityMs: 700 });
    // Nothing before start() has returned (a handler may use the consumer it returns)...
    expect(handled).toEqual([]);
    expect(source.nowCalls).toBe(0);
    // ...then all of it in one go, after one await: no promise between a message and the next.
    await Promise.resolve();
    expect(handled).toHaveLength(50);
    expect(source.receives).toEqual([{ max: 1, waitMs: 1000, visibilityMs: 700 }]);
    expect(source.nowCalls).toBe(51);
    expect(source.nowAsked[0]).toEqual({ max: 1, visibilityMs: 700 });
    // Nothing ready: the long poll, woken by the next message.
    source.push(message(51), message(52));
    await turns();
    expect(handled).toEqual(Array.from({ length: 52 }, (_, i) => i + 1));
    expect(source.acked).toHaveLength(52);
  });

  it('awaits a receiveNow() that answers with a promise, and receives when it answers undefined', async () => {
    const source = new NowSource();
    source.answer = 'promise';
    source.push(message(1), message(2));
    const handled: unknown[] = [];
    start(source, (m) => void handled.push(m.payload), { concurrency: 2 });
    expect(handled).toEqual([]);
    await turns();
    expect(handled).toEqual([1, 2]);
    const other = new NowSource();
    other.answer = 'none';
    other.push(message(3));
    const seen: unknown[] = [];
    start(other, (m) => void seen.push(m.payload), { concurrency: 3 });
    await turns();
    expect(seen).toEqual([3]);
    expect(other.receives[0]).toEqual({ max: 3, waitMs: 1000 });
  });

  it('treats a receiveNow() that throws as a failed receive: reported, then a rest', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const source = new NowSource();
    source.answer = 'throw';
    source.push(message(1));
    start(source, () => {});
    await vi.advanceTimersByTimeAsync(0);
    expect(errors).toEqual([['receiveNow failed', { topic: 'jobs' }]]);
    expect(source.nowCalls).toBe(1);
    await vi.advanceTimersByTimeAsync(99);
    expect(source.nowCalls).toBe(1);
    source.answer = 'sync';
    await vi.advanceTimersByTimeAsync(1);
    expect(source.acked).toEqual(['r1']);
  });

  it('delivers and closes under fake timers that replace performance and setImmediate', async () => {
    // Turns of the real event loop: Node's own setImmediate, which the fakes do not replace.
    const realTurns = async () => {
      for (let i = 0; i < 5; i++) await new Promise((resolve) => realSetImmediate(resolve));
    };
    vi.useFakeTimers({ toFake: ['performance', 'setImmediate', 'setTimeout', 'clearTimeout'] });
    try {
      const source = new MemorySource();
      const handled: string[] = [];
      const worker = start(source, (m) => void handled.push(m.id), { concurrency: 1 });
      source.push(message(1));
      await realTurns();
      // Fake time runs on while the consumer waits for its next message.
      vi.advanceTimersByTime(50);
      source.push(message(2));
      await realTurns();
      expect(handled).toEqual(['m1', 'm2']);
      let closed = false;
      void worker.close().then(() => (closed = true));
      await realTurns();
      expect(closed).toBe(true);
      expect(source.acked).toEqual(['r1', 'r2']);
    } finally {
      vi.useRealTimers();
    }
  });

  it('runs the messages of a receive that answers after close(), and waits for them', async () => {
    const source = new MemorySource();
    const late = deferred();
    let answer!: (messages: ReceivedMessage[]) => void;
    source.receive = () => new Promise((resolve) => (answer = resolve));
    const handled: unknown[] = [];
    const worker = start(source, async (m) => {
      await late.promise;
      handled.push(m.payload);
    });
    await turns();
    const closing = worker.close();
    answer([message(7)]); // the receive was already answered when it was aborted
    await turns();
    late.resolve();
    await closing;
    expect(handled).toEqual([7]);
    expect(source.acked).toEqual(['r7']);
  });
});

describe('checkConsumeOptions', () => {
  it('fills in the defaults; waitMs is an option only where no wait is fixed', () => {
    const http = checkConsumeOptions(undefined);
    expect(http).toMatchObject({ concurrency: 1, visibilityMs: undefined, waitMs: 20_000 });
    expect(checkConsumeOptions({ waitMs: 5 }).waitMs).toBe(5);
    expect(checkConsumeOptions({}, 1000).waitMs).toBe(1000);
    expect(() => checkConsumeOptions({ waitMs: 5 }, 1000)).toThrow(/no option "waitMs"/);
    expect(() => checkConsumeOptions({ concurency: 4 })).toThrow(
      /no option "concurency" \(did you mean "concurrency"\?\)/,
    );
    expect(() => checkConsumeOptions({ waitMs: 0 })).toThrow(/waitMs/);
    expect(() => checkConsumeOptions({ concurrency: 1001 })).toThrow(/concurrency/);
    expect(() => checkConsumeOptions({ visibilityMs: 43_200_001 })).toThrow(/visibilityMs/);
  });

  it('defaults onError to a TickwheelConsumerWarning that says where the failure was', async () => {
    const { onError } = checkConsumeOptions({});
    const warned = new Promise<Error>((resolve) => process.once('warning', resolve));
    onError(new Error('disk full'), { topic: 'jobs' });
    const warning = await warned;
    expect([warning.name, warning.message]).toEqual([
      'TickwheelConsumerWarning',
      'consumer of topic jobs: Error: disk full',
    ]);
  });
});
