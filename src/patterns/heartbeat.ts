/**
 * Heartbeat: an IdleTracker with one state, reader-idle, period `intervalMs`: heartbeat n is sent
 * after n quiet periods, and a peer is given up after maxMissed + 1 (docs/patterns.md).
 */

import { checkCallback, checkOption, checkOptions, optionNames } from '../validate.js';
import { IdleTracker, type IdleHandle } from './idle.js';
import { reportError } from '../timer/driver.js';
import { PATTERN_OPTIONS, isThenable, type PatternOptions } from './pattern-wheel.js';

export interface HeartbeatOptions<T> extends PatternOptions {
  /** Quiet time before a heartbeat is sent, and each heartbeat's time to be answered. */
  intervalMs: number;
  /** Unanswered heartbeats before giving up. Default 3 (Dubbo's); 0: a plain read timeout. */
  maxMissed?: number;
  /** Sends heartbeat `attempt` (1 .. maxMissed); a throw or rejection goes to `onError`. */
  send: (item: T, attempt: number) => unknown;
  /** The item stopped answering and is no longer tracked: close it. */
  onDead: (item: T) => void;
}

const HEARTBEAT_OPTIONS = optionNames<HeartbeatOptions<unknown>>({
  ...PATTERN_OPTIONS,
  intervalMs: true,
  maxMissed: true,
  send: true,
  onDead: true,
});

export class Heartbeat<T = unknown> {
  private readonly idle: IdleTracker<T>;
  private readonly maxMissed: number;
  private readonly send: HeartbeatOptions<T>['send'];
  private readonly onDead: HeartbeatOptions<T>['onDead'];
  private readonly report: (err: unknown) => void;

  constructor(options: HeartbeatOptions<T>) {
    checkOptions(options, HEARTBEAT_OPTIONS, 'new Heartbeat()', '{ intervalMs, send, onDead }');
    const intervalMs = checkOption(options.intervalMs, 'intervalMs', Number.MIN_VALUE);
    this.maxMissed = checkOption(options.maxMissed ?? 3, 'maxMissed', 0, 2 ** 31 - 1, true);
    checkCallback(options.send, 'send');
    checkCallback(options.onDead, 'onDead');
    this.send = options.send;
    this.onDead = options.onDead;
    // A throw from send or onDead reaches onError through the tracker; a rejection, through here.
    this.report = (err) => reportError(options.onError, err);
    this.idle = new IdleTracker<T>({
      clock: options.clock,
      resolution: options.resolution,
      unref: options.unref,
      onError: options.onError,
      initialCapacity: options.initialCapacity,
      readerIdleMs: intervalMs,
      onIdle: (item, _state, periods, handle) => this.quiet(item, periods, handle),
    });
  }

  /** Tracking counts as hearing from it. */
  track(item: T): IdleHandle {
    return this.idle.track(item);
  }

  /** Something arrived from the peer: data or a heartbeat reply. False if not tracked. */
  received(handle: IdleHandle): boolean {
    return this.idle.read(handle);
  }

  /** The connection closed for another reason. True if it was tracked. */
  untrack(handle: IdleHandle): boolean {
    return this.idle.untrack(handle);
  }

  has(handle: IdleHandle): boolean {
    return this.idle.has(handle);
  }

  get size(): number {
    return this.idle.size;
  }

  /** Stops everything, with no heartbeats and no onDead. */
  close(): void {
    this.idle.close();
  }

  /** `periods` quiet intervals have passed since the peer was last heard from. */
  private quiet(item: T, periods: number, handle: IdleHandle): void {
    if (periods > this.maxMissed) {
      this.idle.untrack(handle);
      this.onDead(item);
      return;
    }
    const sent = this.send(item, periods);
    if (isThenable(sent)) sent.then(undefined, this.report);
  }
}
