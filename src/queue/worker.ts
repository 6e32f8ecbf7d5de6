/**
 * Worker (BullMQ's word): runs a handler over one topic's messages from a source that can
 * receive, ack and nack (the embedded queue's, the client's, the cluster's), at most
 * `concurrency` at once: acked when it resolves, nacked when it throws. With `prefetch`, up to
 * that many more are received ahead and wait here for a free slot (fewer, larger receives where
 * each costs a round trip); close() runs them too. Failures go to onError
 * with their context (an ack or nack once per shared promise; a failed receive rests the
 * worker receiveBackoff()). close() aborts a long poll, then waits for running handlers and
 * their acks, so a handler must not await its own consumer's close(). A synchronous handler
 * makes no promise. Imports nothing that does I/O, so the client can use it.
 */

import { performance as realClock } from 'node:perf_hooks';
import { setImmediate as realSetImmediate } from 'node:timers';
import {
  checkCallback,
  checkKnownOptions,
  checkOption,
  checkOptionsObject,
  optionNames,
} from '../validate.js';
import { MAX_RECEIVE, MAX_VISIBILITY_MS, MAX_WAIT_MS } from '../protocol/limits.js';
import { faultOf, warnFault, type FaultReporter, type QueueFault } from './faults.js';
import { reasonOf } from './message.js';
import { endProcess, runProcessing, startProcess, type Processing } from './tracing.js';
import type {
  ConsumeErrorContext,
  ConsumeOptions,
  Consumer,
  MessageHandler,
  ReceivedMessage,
} from './types.js';

export const MAX_CONCURRENCY = 1000;

export interface WorkerSource {
  /** Up to `max` messages, waiting up to `waitMs` for the first; ends soon once `signal` aborts. */
  receive(
    topic: string,
    options: { max: number; waitMs: number; visibilityMs?: number },
    signal: AbortSignal,
  ): Promise<ReceivedMessage[]>;
  /**
   * Optional: what is ready now, without a promise when it can be (undefined: call receive()).
   * `options` is read at once: the worker reuses the object.
   */
  receiveNow?(
    topic: string,
    options: { max: number; visibilityMs?: number },
  ): ReceivedMessage[] | Promise<ReceivedMessage[]> | undefined;
  /** May return one promise for several acks (waited on once); `message`: the receipt's delivery. */
  ack(receipt: string, message?: ReceivedMessage): PromiseLike<unknown>;
  nack(receipt: string, reason: string): PromiseLike<unknown>;
}

export interface WorkerSettings {
  concurrency: number;
  /** Messages received ahead of a free slot, waiting for one. */
  prefetch: number;
  /** Undefined: the source's own default. */
  visibilityMs: number | undefined;
  waitMs: number;
  onError: (err: unknown, context: ConsumeErrorContext) => void;
  /** Where the worker's own troubles go (a slow close, an onError that threw). */
  onFault: FaultReporter;
}

const CONSUME_OPTIONS = optionNames<ConsumeOptions>({
  concurrency: true,
  prefetch: true,
  visibilityMs: true,
  onError: true,
});

/** Default long-poll wait of the client's consume() (its `waitMs` option). */
export const DEFAULT_CONSUME_WAIT_MS = 20_000;

/** Checks consume() options; `fixedWaitMs`: each receive's wait where it is no option. */
export function checkConsumeOptions(
  options: unknown,
  fixedWaitMs?: number,
  onFault: FaultReporter = warnFault,
): WorkerSettings {
  const given = checkOptionsObject(
    (options === undefined ? {} : options) as ConsumeOptions & { waitMs?: unknown },
    'consume options',
    '{ concurrency: 8 }',
  );
  checkKnownOptions(
    given,
    fixedWaitMs === undefined ? [...CONSUME_OPTIONS, 'waitMs'] : CONSUME_OPTIONS,
    'consume()',
  );
  if (given.onError !== undefined) checkCallback(given.onError, 'onError');
  return {
    concurrency: checkOption(given.concurrency ?? 1, 'concurrency', 1, MAX_CONCURRENCY, true),
    prefetch: checkOption(given.prefetch ?? 0, 'prefetch', 0, MAX_RECEIVE, true),
    visibilityMs:
      given.visibilityMs === undefined
        ? undefined
        : checkOption(given.visibilityMs, 'visibilityMs', 1, MAX_VISIBILITY_MS),
    waitMs:
      fixedWaitMs ?? checkOption(given.waitMs ?? DEFAULT_CONSUME_WAIT_MS, 'waitMs', 1, MAX_WAIT_MS),
    onError: given.onError ?? ((err, context) => onFault(consumeFault(err, context))),
    onFault,
  };
}

/** The rest after `failures` failed receives in a row (0 for the first). */
export function receiveBackoff(failures: number): number {
  return Math.min(5000, 100 * 2 ** failures);
}

export class Worker implements Consumer {
  /** How long close() waits for running handlers before it warns (tests change it). */
  static closeWarnAfterMs = 10_000;
  /**
   * After this long without a turn of the event loop the loop takes one, so a backlog does not
   * starve I/O (with Node's own clock and setImmediate: fake timers must not stall delivery).
   */
  static yieldAfterMs = 10;
  private readonly stopping = new AbortController();
  private active = 0;
  /** Received ahead of a free slot (prefetch), oldest first from `waitingHead`. */
  private readonly waiting: Array<ReceivedMessage | undefined> = [];
  private waitingHead = 0;
  /** startWaiting() is running (a synchronous handler's settle must not run it again). */
  private starting = false;
  private readonly settling = new Set<PromiseLike<unknown>>();
  /** The promise track() added last, while it is in `settling`. */
  private trackedLast: PromiseLike<unknown> | undefined;
  /** Wakes whoever waits for a handler or an ack to finish (the loop, or close()). */
  private freed: (() => void) | undefined;
  private rest: { timer: ReturnType<typeof setTimeout>; wake: () => void } | undefined;
  private readonly loop: Promise<void>;
  private closing: Promise<void> | undefined;
  /** The options receiveNow() is called with (see receiveLoop). */
  private readonly nowOptions: { max: number; visibilityMs?: number };

  constructor(
    private readonly source: WorkerSource,
    private readonly topic: string,
    private readonly handler: MessageHandler,
    private readonly settings: WorkerSettings,
  ) {
    this.nowOptions =
      settings.visibilityMs === undefined
        ? { max: 0 }
        : { max: 0, visibilityMs: settings.visibilityMs };
    this.loop = this.receiveLoop();
  }

  close(): Promise<void> {
    return (this.closing ??= this.drain());
  }

  private async drain(): Promise<void> {
    this.stopping.abort();
    this.freed?.();
    if (this.rest !== undefined) {
      clearTimeout(this.rest.timer);
      this.rest.wake();
    }
    await this.loop;
    const slow = setTimeout(() => this.warnSlowClose(), Worker.closeWarnAfterMs);
    slow.unref();
    try {
      // Messages received ahead still run: they are this consumer's deliveries.
      while (this.active > 0 || this.settling.size > 0) {
        await new Promise<void>((resolve) => (this.freed = resolve));
      }
    } finally {
      clearTimeout(slow);
    }
  }

  /** close() is still waiting: most often a handler that awaits close() of its own consumer. */
  private warnSlowClose(): void {
    const what =
      this.active > 0
        ? `${this.active} running handler${this.active === 1 ? '' : 's'}`
        : `${this.settling.size} ack${this.settling.size === 1 ? '' : 's'} or nacks`;
    this.settings.onFault({
      code: 'ERR_TICKWHEEL_SLOW_CLOSE',
      level: 'warn',
      message:
        `close() of the consumer of topic ${this.topic} has waited ${Worker.closeWarnAfterMs} ms ` +
        `for ${what}. A handler that awaits close() of its own consumer never ends: ` +
        'call close() there without awaiting it.',
      name: 'TickwheelConsumerWarning',
      fields: { topic: this.topic },
    });
  }

  private async receiveLoop(): Promise<void> {
    const { concurrency, prefetch, visibilityMs, waitMs } = this.settings;
    const signal = this.stopping.signal;
    let failures = 0;
    // Nothing runs before consume() has returned its consumer: a handler may use it (to close
    // it), and what is ready now would otherwise be handled inside the constructor.
    await undefined;
    let turnStarted = realClock.now();
    while (!signal.aborted) {
      if (realClock.now() - turnStarted >= Worker.yieldAfterMs) {
        await new Promise<void>((resolve) => realSetImmediate(resolve));
        turnStarted = realClock.now();
        continue;
      }
      // With every slot busy, received again once the messages waiting are down to half the
      // prefetch (not for each one that starts).
      const waiting = this.waiting.length - this.waitingHead;
      const room = concurrency + prefetch - this.active - waiting;
      if (room <= 0 || (this.active >= concurrency && waiting * 2 > prefetch)) {
        await new Promise<void>((resolve) => (this.freed = resolve));
        this.freed = undefined;
        continue;
      }
      const max = Math.min(MAX_RECEIVE, room);
      let batch: ReceivedMessage[];
      try {
        // What is ready now, with no promise per receive: a synchronous handler and the next
        // take then run one after the other in this turn (up to yieldAfterMs).
        let now: ReturnType<NonNullable<WorkerSource['receiveNow']>>;
        if (this.source.receiveNow !== undefined) {
          this.nowOptions.max = max;
          now = this.source.receiveNow(this.topic, this.nowOptions);
        }
        if (now !== undefined && (!Array.isArray(now) || now.length > 0)) {
          batch = Array.isArray(now) ? now : await now;
        } else {
          batch = await this.source.receive(
            this.topic,
            visibilityMs === undefined ? { max, waitMs } : { max, waitMs, visibilityMs },
            signal,
          );
        }
        failures = 0;
      } catch (err) {
        if (signal.aborted) break;
        this.report(err, { topic: this.topic });
        await this.pause(receiveBackoff(failures++));
        // The pause was a turn of its own (a timer): no real-time yield is owed after it.
        turnStarted = realClock.now();
        continue;
      }
      if (batch.length <= concurrency - this.active && this.waitingHead === this.waiting.length) {
        for (let i = 0; i < batch.length; i++) {
          this.active++;
          this.run(batch[i]);
        }
      } else {
        for (let i = 0; i < batch.length; i++) this.waiting.push(batch[i]);
        this.startWaiting();
      }
    }
  }

  /** Runs messages received ahead while slots are free, oldest first. */
  private startWaiting(): void {
    if (this.starting) return;
    this.starting = true;
    try {
      while (this.active < this.settings.concurrency && this.waitingHead < this.waiting.length) {
        const message = this.waiting[this.waitingHead] as ReceivedMessage;
        this.waiting[this.waitingHead++] = undefined;
        this.active++;
        this.run(message);
      }
      if (this.waitingHead === this.waiting.length) {
        this.waiting.length = 0;
        this.waitingHead = 0;
      } else if (this.waitingHead * 2 >= this.waiting.length) {
        // Refilled before it empties, the array would grow by a cell per message: the live tail
        // (no longer than the part run) moves to the front.
        this.waiting.copyWithin(0, this.waitingHead);
        this.waiting.length -= this.waitingHead;
        this.waitingHead = 0;
      }
    } finally {
      this.starting = false;
    }
  }

  /** No async function per message: a synchronous handler costs no promise. */
  private run(message: ReceivedMessage): void {
    const processing = startProcess(this.topic, message);
    let result: unknown;
    try {
      result =
        processing === undefined
          ? this.handler(message)
          : runProcessing(processing, this.handler, message);
    } catch (err) {
      this.settle(message, true, err, processing);
      return;
    }
    if (isThenable(result)) {
      result.then(
        () => this.settle(message, false, undefined, processing),
        (err: unknown) => this.settle(message, true, err, processing),
      );
    } else this.settle(message, false, undefined, processing);
  }

  private settle(
    message: ReceivedMessage,
    failed: boolean,
    failure: unknown,
    processing: Processing | undefined,
  ): void {
    if (processing !== undefined) endProcess(processing, failure, failed);
    this.active--;
    if (this.waitingHead < this.waiting.length) this.startWaiting();
    this.freed?.();
    let wait: PromiseLike<unknown>;
    try {
      wait = failed
        ? this.source.nack(message.receipt, reasonOf(failure))
        : this.source.ack(message.receipt, message);
    } catch (err) {
      wait = Promise.reject(err);
    }
    this.track(wait, message);
    if (failed) this.report(failure, contextOf(this.topic, message));
  }

  private track(wait: PromiseLike<unknown>, message: ReceivedMessage): void {
    // Acks of one group commit share a promise: most often the one tracked last.
    if (wait === this.trackedLast || this.settling.has(wait)) return;
    this.trackedLast = wait;
    this.settling.add(wait);
    wait.then(
      () => this.untrack(wait),
      (err: unknown) => {
        this.untrack(wait);
        this.report(err, contextOf(this.topic, message));
      },
    );
  }

  private untrack(wait: PromiseLike<unknown>): void {
    this.settling.delete(wait);
    if (this.trackedLast === wait) this.trackedLast = undefined;
    this.freed?.();
  }

  private pause(ms: number): Promise<void> {
    if (this.stopping.signal.aborted) return Promise.resolve();
    return new Promise<void>((wake) => {
      this.rest = { timer: setTimeout(wake, ms), wake };
    }).then(() => {
      this.rest = undefined;
    });
  }

  /** onError, which must not end the worker: what it throws becomes a process warning. */
  private report(err: unknown, context: ConsumeErrorContext): void {
    try {
      this.settings.onError(err, context);
    } catch (thrown) {
      this.settings.onFault(
        faultOf(thrown, { code: 'ERR_TICKWHEEL_LISTENER_FAILED', fields: { topic: this.topic } }),
      );
    }
  }
}

function contextOf(topic: string, message: ReceivedMessage): ConsumeErrorContext {
  return { topic, id: message.id, attempts: message.attempts };
}

function consumeFault(err: unknown, context: ConsumeErrorContext): QueueFault {
  const where =
    context.id === undefined
      ? `consumer of topic ${context.topic}`
      : `consumer of topic ${context.topic}, message ${context.id}, attempt ${context.attempts}`;
  return faultOf(err, {
    code: context.id === undefined ? 'ERR_TICKWHEEL_INTERNAL' : 'ERR_TICKWHEEL_HANDLER_FAILED',
    message: `${where}: ${reasonOf(err)}`,
    name: 'TickwheelConsumerWarning',
    fields: { topic: context.topic, id: context.id, attempts: context.attempts },
  });
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as { then?: unknown } | null | undefined)?.then === 'function';
}
