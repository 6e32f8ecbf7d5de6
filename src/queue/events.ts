/**
 * Message events, as they happen (not stored), through `events.on(type | 'event')` or
 * `events.watch()`. No event is built while nobody listens; watch() throws
 * ERR_TICKWHEEL_EVENTS_LOST rather than skip silently. A listener that throws is reported.
 */

import type { TraceContext } from '../protocol/trace-context.js';
import { EventEmitter } from 'node:events';
import { TickwheelStateError } from '../errors.js';
import { checkOption, checkOptionsObject, describe, invalidOption } from '../validate.js';
import { faultOf, warnFault, type FaultReporter } from './faults.js';
import { checkTopic } from './message.js';

export const EVENT_TYPES = [
  'scheduled',
  'delivered',
  'acked',
  'failed',
  'dead',
  'cancelled',
] as const;

export type QueueEventType = (typeof EVENT_TYPES)[number];

export interface QueueEvent {
  type: QueueEventType;
  id: string;
  topic: string;
  /** When it happened: epoch ms on the queue's clock, not rounded (Valkey/Redis: whole ms). */
  at: number;
  /** The message's due time: for `failed`, when it is due again. */
  deliverAt: number;
  attempts: number;
  /** `failed` and `dead`: why the delivery failed. */
  reason?: string;
}

export interface WatchOptions {
  /** Only this topic's events. Default: every topic. */
  topic?: string;
  /** Only these types. Default: all. */
  types?: readonly QueueEventType[];
  /** Ends the iteration (without an error) when aborted. */
  signal?: AbortSignal;
  /** Events kept for a reader that is behind; more and the iterator throws. Default 10,000. */
  buffer?: number;
}

/** The fields of an event a queue passes to `emit` (`at` is filled in). */
export interface EventSource {
  id: string;
  topic: string;
  deliverAt: number;
  attempts: number;
  /** Its stored trace context, where the backend has it at hand (a `dead` span continues it). */
  trace?: TraceContext | undefined;
}

const NAMES = new Set<string | symbol>([...EVENT_TYPES, 'event']);

export class QueueEvents extends EventEmitter {
  /** Listeners of the event types and of 'event': the queue makes events only while > 0. */
  private listening = 0;

  constructor(
    private readonly now: () => number,
    /** Where a listener that throws is told (the queue's onFault). */
    private readonly onFault: FaultReporter = warnFault,
  ) {
    super({ captureRejections: false });
    this.setMaxListeners(0);
    // Keeps `listening` exact: two hooks of this emitter's own, never removed (see below).
    this.on('newListener', (name: string | symbol) => {
      if (NAMES.has(name)) this.listening++;
    });
    this.on('removeListener', (name: string | symbol) => {
      if (NAMES.has(name)) this.listening--;
    });
  }

  /** Removes listeners (all, or of `name`), but never the emitter's own two hooks. */
  override removeAllListeners(name?: string | symbol): this {
    const names = name === undefined ? this.eventNames() : [name];
    for (const each of names) {
      if (each !== 'newListener' && each !== 'removeListener') super.removeAllListeners(each);
    }
    let listening = 0;
    for (const each of NAMES) listening += this.listenerCount(each);
    this.listening = listening;
    return this;
  }

  get active(): boolean {
    return this.listening > 0;
  }

  record(type: QueueEventType, message: EventSource, reason?: string): void {
    if (!this.active) return;
    const event: QueueEvent = {
      type,
      id: message.id,
      topic: message.topic,
      at: this.now(),
      deliverAt: message.deliverAt,
      attempts: message.attempts,
    };
    if (reason !== undefined) event.reason = reason;
    // Each listener on its own: one that throws must not keep the event from the others.
    this.deliver(type, event);
    this.deliver('event', event);
  }

  private deliver(name: string, event: QueueEvent): void {
    for (const listener of this.rawListeners(name) as Array<(event: QueueEvent) => void>) {
      try {
        listener.call(this, event);
      } catch (err) {
        this.onFault(
          faultOf(err, { code: 'ERR_TICKWHEEL_LISTENER_FAILED', fields: { event: name } }),
        );
      }
    }
  }

  watch(options: WatchOptions = {}): AsyncIterableIterator<QueueEvent> {
    const { topic, types, signal } = checkWatch(options);
    const limit = checkOption(options.buffer ?? 10_000, 'buffer', 1, 10_000_000, true);
    const buffered: QueueEvent[] = [];
    let head = 0;
    let failure: Error | undefined;
    let ended = false;
    let wake: (() => void) | undefined;
    const listener = (event: QueueEvent) => {
      if (ended || failure !== undefined) return;
      if (topic !== undefined && event.topic !== topic) return;
      if (types !== undefined && !types.has(event.type)) return;
      if (buffered.length - head >= limit) {
        failure = new TickwheelStateError(
          'ERR_TICKWHEEL_EVENTS_LOST',
          `the reader fell more than ${limit} events behind: events were lost; watch again ` +
            '(and read faster, or give a larger buffer)',
        );
      } else buffered.push(event);
      wake?.();
    };
    const stop = () => {
      if (ended) return;
      ended = true;
      this.off('event', listener);
      signal?.removeEventListener('abort', stop);
      wake?.();
    };
    this.on('event', listener);
    signal?.addEventListener('abort', stop, { once: true });
    if (signal?.aborted) stop();
    const iterator: AsyncIterableIterator<QueueEvent> = {
      next: async () => {
        for (;;) {
          if (head < buffered.length) {
            const value = buffered[head++];
            if (head > 1024 && head * 2 > buffered.length) {
              buffered.splice(0, head);
              head = 0;
            }
            return { value, done: false };
          }
          if (failure !== undefined) {
            const err = failure;
            stop();
            throw err;
          }
          if (ended) return { value: undefined, done: true };
          await new Promise<void>((resolve) => (wake = resolve));
          wake = undefined;
        }
      },
      return: async () => {
        stop();
        return { value: undefined, done: true };
      },
      [Symbol.asyncIterator]() {
        return iterator;
      },
    };
    return iterator;
  }
}

/** Checks watch()'s options (the client's events() checks the same). */
export function checkWatch(options: WatchOptions) {
  checkOptionsObject(options, 'watch options');
  const topic = options.topic === undefined ? undefined : checkTopic(options.topic);
  let types: Set<QueueEventType> | undefined;
  if (options.types !== undefined) {
    if (!Array.isArray(options.types) || options.types.length === 0) {
      throw invalidOption(
        `types must be a non-empty array of ${EVENT_TYPES.join(', ')}, got ${describe(options.types)}`,
      );
    }
    for (const type of options.types) {
      if (!EVENT_TYPES.includes(type)) {
        throw invalidOption(
          `unknown event type ${describe(type)}: the types are ${EVENT_TYPES.join(', ')}`,
        );
      }
    }
    types = new Set(options.types);
  }
  const signal = options.signal;
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw invalidOption(`signal must be an AbortSignal, got ${describe(signal)}`);
  }
  return { topic, types, signal };
}
