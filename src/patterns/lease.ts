/**
 * Lease keep-alive, Redisson's "lock watchdog" (docs/patterns.md). The lease is sure only up to
 * `validUntil` = start of the last successful renewal (or hold()) + leaseMs, so a renewal must
 * settle by min(its start + renewTimeoutMs, validUntil), or the lease is lost then. A loss is not
 * retried (as in Redisson): the lock may already be someone else's. One lean timer per Lease.
 */

import {
  TickwheelRangeError,
  TickwheelStateError,
  TickwheelTypeError,
  checkOpen,
} from '../errors.js';
import {
  checkCallback,
  checkOption,
  describe,
  checkOptions,
  checkSignal,
  optionNames,
} from '../validate.js';
import type { TimerHandle, TimerWheel } from '../timer/index.js';
import { LeaseLostError, stackless, TimeoutError } from './errors.js';
import { PATTERN_OPTIONS, isThenable, patternWheel, type PatternOptions } from './pattern-wheel.js';

export type LeaseState = 'held' | 'released' | 'lost';

export type LeaseKeeperOptions = PatternOptions;

export interface LeaseOptions<D = unknown> {
  /** How long the store keeps the lease without a renewal. Counted from hold(). */
  leaseMs: number;
  /** Time from the start of one successful renewal to the next. Default leaseMs / 3. */
  renewEveryMs?: number;
  /** Time a renewal has to settle (capped by the lease's validity). Default renewEveryMs. */
  renewTimeoutMs?: number;
  /** Extends the lease in the store (a token-checked PEXPIRE): true or nothing, false if lost. */
  renew: (lease: Lease<D>) => boolean | void | PromiseLike<boolean | void>;
  /** Frees the lease in the store, e.g. a token-checked DEL; run by release() and on abort. */
  release?: (lease: Lease<D>) => unknown;
  /** The lease was lost (not released): stop the work that relied on it. */
  onLost?: (error: LeaseLostError, lease: Lease<D>) => void;
  /** Aborting it ends the lease as if release() were called. */
  signal?: AbortSignal;
  /** Anything you want to find on `lease.data`, such as the lock's key and token. */
  data?: D;
}

/** The keeper's methods of a Lease: symbols, off the user's surface. */
const timerFired = Symbol('timerFired');
const lose = Symbol('lose');

interface KeptLease {
  [timerFired](): void;
  [lose](message: string, cause: unknown): void;
}

interface LeaseHost {
  now(): number;
  wheel: TimerWheel<KeptLease>;
  report(err: unknown): void;
  ended(lease: KeptLease): void;
}

const KEEPER_OPTIONS = optionNames<LeaseKeeperOptions>(PATTERN_OPTIONS);

const HOLD_OPTIONS = optionNames<LeaseOptions>({
  leaseMs: true,
  renewEveryMs: true,
  renewTimeoutMs: true,
  renew: true,
  release: true,
  onLost: true,
  signal: true,
  data: true,
});

const positive = (value: unknown, name: string) => checkOption(value, name, Number.MIN_VALUE);

export class LeaseKeeper {
  private readonly host: LeaseHost;
  private readonly held = new Set<KeptLease>();
  private closed = false;

  constructor(options: LeaseKeeperOptions = {}) {
    checkOptions(options, KEEPER_OPTIONS, 'new LeaseKeeper()', '{ clock }');
    const { clock, wheel, report } = patternWheel<KeptLease>(options, (lease) =>
      lease[timerFired](),
    );
    this.host = {
      now: () => clock.now(),
      wheel,
      report,
      ended: (lease) => this.held.delete(lease),
    };
  }

  /** Keeps a lease you have just acquired alive until it is released or lost. */
  hold<D = unknown>(options: LeaseOptions<D>): Lease<D> {
    checkOpen(this.closed, 'this LeaseKeeper is closed; create a new one to hold leases');
    const lease = new Lease<D>(this.host, options);
    if (lease.state === 'held') this.held.add(lease);
    return lease;
  }

  get size(): number {
    return this.held.size;
  }

  /** Stops renewing: every held lease is lost (ERR_TICKWHEEL_CLOSED), none released. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    const cause = new TickwheelStateError(
      'ERR_TICKWHEEL_CLOSED',
      'the LeaseKeeper was closed while the lease was held',
    );
    for (const lease of [...this.held]) lease[lose]('the LeaseKeeper was closed', cause);
    this.host.wheel.close();
  }
}

export class Lease<D = unknown> implements KeptLease {
  readonly data: D;
  private readonly host: LeaseHost;
  private readonly options: LeaseOptions<D>;
  private readonly leaseMs: number;
  private readonly everyMs: number;
  private readonly timeoutMs: number;
  private current: LeaseState = 'held';
  private reason: unknown;
  private renewing = false;
  private attempt = 0;
  // Doubles from the start (NaN, not 0): a small integer would change representation at the
  // first renewal, and V8 would migrate every live Lease to a new layout (2.5 µs each).
  /** Start of the last successful renewal, or the time of hold(). */
  private lastStart = NaN;
  private attemptStart = NaN;
  /** The pending timer: the next renewal, or the deadline of the one in flight. NaN: none. */
  private timer: TimerHandle = NaN;
  private renewed = 0;
  private controller: AbortController | undefined;
  private readonly external: AbortSignal | undefined;
  private readonly onExternalAbort: (() => void) | undefined;
  private releasing: Promise<void> | undefined;

  /** Only LeaseKeeper.hold() makes one. */
  constructor(host: LeaseHost, options: LeaseOptions<D>) {
    checkOptions(options, HOLD_OPTIONS, 'hold()', '{ leaseMs: 30_000, renew }');
    this.leaseMs = positive(options.leaseMs, 'leaseMs');
    this.everyMs = positive(options.renewEveryMs ?? this.leaseMs / 3, 'renewEveryMs');
    if (this.everyMs >= this.leaseMs) {
      throw new TickwheelRangeError(
        'ERR_TICKWHEEL_INVALID_OPTION',
        `renewEveryMs (${this.everyMs}) must be below leaseMs (${this.leaseMs}): a renewal has ` +
          'to start while the lease is still held',
      );
    }
    this.timeoutMs = positive(options.renewTimeoutMs ?? this.everyMs, 'renewTimeoutMs');
    checkCallback(options.renew, 'renew');
    if (options.release !== undefined) checkCallback(options.release, 'release');
    if (options.onLost !== undefined) checkCallback(options.onLost, 'onLost');
    this.external = checkSignal(options.signal);
    this.host = host;
    this.options = options;
    this.data = options.data as D;
    this.lastStart = host.now();
    if (this.external?.aborted) {
      this.onExternalAbort = undefined;
      this.abortedBy(this.external.reason);
      return;
    }
    this.timer = host.wheel.schedule(this.everyMs, this);
    if (this.external !== undefined) {
      const external = this.external;
      this.onExternalAbort = () => this.abortedBy(external.reason);
      external.addEventListener('abort', this.onExternalAbort, { once: true });
    }
  }

  /** 'held' until released (release() or the signal) or lost. */
  get state(): LeaseState {
    return this.current;
  }

  get renewals(): number {
    return this.renewed;
  }

  /** Clock time until which the lease is surely held (see the module comment). */
  get validUntil(): number {
    return this.lastStart + this.leaseMs;
  }

  /** Why the lease ended: the LeaseLostError, the abort reason, or undefined (held, released). */
  get endReason(): unknown {
    return this.reason;
  }

  /** Aborts when the lease ends, with endReason; made on first use (an AbortController each). */
  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController();
      if (this.current !== 'held') this.controller.abort(this.reason);
    }
    return this.controller.signal;
  }

  /** Stops renewing and runs options.release once (harmless after a loss, token-checked). */
  release(): Promise<void> {
    if (this.releasing === undefined) {
      if (this.current === 'held') this.end('released', undefined);
      this.releasing = this.runRelease();
    }
    return this.releasing;
  }

  /** The lease's timer fired: start a renewal, or the one in flight is too late. */
  [timerFired](): void {
    this.timer = NaN;
    const now = this.host.now();
    if (this.renewing) {
      const capped = this.attemptStart + this.timeoutMs > this.validUntil;
      const waited = now - this.attemptStart;
      const message = `renew() did not settle in ${Math.round(waited)} ms`;
      this[lose](
        capped
          ? 'renew() did not settle before the lease ran out'
          : `renew() did not settle within renewTimeoutMs (${this.timeoutMs} ms)`,
        stackless(() => new TimeoutError(message, waited)),
      );
    } else if (now >= this.validUntil) {
      const late = Math.round(now - this.validUntil);
      this[lose](
        `the next renewal could only start ${late} ms after the lease ran out ` +
          '(was the event loop blocked?)',
        undefined,
      );
    } else {
      this.startRenewal(now);
    }
  }

  [lose](message: string, cause: unknown): void {
    if (this.current !== 'held') return;
    const error = stackless(
      () => new LeaseLostError(`lease lost: ${message}`, cause === undefined ? {} : { cause }),
    );
    this.end('lost', error);
    if (this.options.onLost !== undefined) {
      try {
        this.options.onLost(error, this);
      } catch (err) {
        this.host.report(err);
      }
    }
  }

  private startRenewal(now: number): void {
    this.renewing = true;
    const attempt = ++this.attempt;
    this.attemptStart = now;
    const deadline = Math.min(now + this.timeoutMs, this.validUntil);
    this.timer = this.host.wheel.schedule(deadline - now, this);
    let result: unknown;
    try {
      result = this.options.renew(this);
    } catch (err) {
      this[lose]('renew() threw', err);
      return;
    }
    if (isThenable(result)) {
      result.then(
        (value) => this.settled(attempt, value),
        (err: unknown) => {
          if (attempt === this.attempt) this[lose]('renew() rejected', err);
        },
      );
    } else {
      this.settled(attempt, result);
    }
  }

  private settled(attempt: number, value: unknown): void {
    if (attempt !== this.attempt || this.current !== 'held') return;
    if (value === false) {
      this[lose]('renew() answered false: the lease is no longer held', undefined);
      return;
    }
    if (value !== true && value !== undefined) {
      this[lose](
        'renew() answered neither true, false nor undefined',
        new TickwheelTypeError(
          'ERR_TICKWHEEL_INVALID_CALLBACK',
          `renew() must resolve to true or undefined (renewed) or false (lost), got ${describe(value)}`,
        ),
      );
      return;
    }
    this.host.wheel.clearTimeout(this.timer);
    this.renewing = false;
    this.renewed++;
    this.lastStart = this.attemptStart;
    this.timer = this.host.wheel.schedule(this.lastStart + this.everyMs - this.host.now(), this);
  }

  private end(state: LeaseState, reason: unknown): void {
    this.current = state;
    this.reason = reason;
    this.renewing = false;
    this.attempt++; // a renewal still in flight is now ignored
    this.host.wheel.clearTimeout(this.timer);
    this.timer = NaN;
    this.host.ended(this);
    if (this.onExternalAbort !== undefined) {
      this.external?.removeEventListener('abort', this.onExternalAbort);
    }
    this.controller?.abort(reason);
  }

  private async runRelease(): Promise<void> {
    if (this.options.release !== undefined) await this.options.release(this);
  }

  /** The hold()'s signal aborted: released, options.release run in the background. */
  private abortedBy(reason: unknown): void {
    this.end('released', reason);
    this.release().then(undefined, this.host.report);
  }
}
