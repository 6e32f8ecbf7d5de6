/**
 * Request deadlines (Dubbo's DefaultFuture map): resolve, reject, abort or the deadline, whatever
 * comes first, settles the promise and removes the id, so a late answer finds nothing
 * (docs/patterns.md). A request is a row in arrays, a Map entry from id to row, one lean timer.
 */

import { AbortError, TickwheelStateError, TickwheelTypeError, checkOpen } from '../errors.js';
import {
  checkDelay,
  checkKnownOptions,
  checkOptions,
  checkOptionsObject,
  checkSignal,
  describe,
  invalidOption,
  onlyKnownOptions,
  optionNames,
} from '../validate.js';
import { TimerWheel, type TimerHandle } from '../timer/index.js';
import { EntryStore, grown } from '../wheel/index.js';
import { stackless, TimeoutError } from './errors.js';
import { PATTERN_OPTIONS, isThenable, patternWheel, type PatternOptions } from './pattern-wheel.js';

const CLOSED = 'this DeadlineRegistry is closed; create a new one to register requests';

export type DeadlineRegistryOptions = PatternOptions;

export interface RegisterOptions {
  /** Aborting it rejects the request with an AbortError (`cause`: the signal's reason). */
  signal?: AbortSignal;
}

type Settle = (value: unknown) => void;

const REGISTRY_OPTIONS = optionNames<DeadlineRegistryOptions>(PATTERN_OPTIONS);

const REGISTER_OPTIONS = optionNames<RegisterOptions>({ signal: true });

const WITH_DEADLINE_OPTIONS = optionNames<WithDeadlineOptions>({
  signal: true,
  timers: true,
});

export class DeadlineRegistry<K = string | number, V = unknown> {
  private readonly wheel: TimerWheel<number>;
  private readonly rows: EntryStore;
  private readonly rowById = new Map<K, number>();
  private ids: Array<K | undefined> = [];
  /** Per row: the promise's resolve only (reject costs 56 bytes more); resolve(rejected) rejects. */
  private resolvers: Array<Settle | undefined> = [];
  private timers = new Float64Array(0);
  private timeouts = new Float64Array(0);
  private readonly aborts = new Map<number, { signal: AbortSignal; listener: () => void }>();
  private closed = false;

  constructor(options: DeadlineRegistryOptions = {}) {
    checkOptions(options, REGISTRY_OPTIONS, 'new DeadlineRegistry()', '{ clock }');
    const { wheel } = patternWheel<number>(options, (row) => this.expire(row));
    this.wheel = wheel;
    this.rows = new EntryStore(options.initialCapacity);
    const grow = (size: number) => {
      this.ids = grown(this.ids, size);
      this.resolvers = grown(this.resolvers, size);
      this.timers = grown(this.timers, size);
      this.timeouts = grown(this.timeouts, size);
    };
    grow(this.rows.capacity);
    this.rows.onGrow(grow);
  }

  /** Request `id`, due `timeoutMs` from now: the promise its answer settles. Ids are unique. */
  register(id: K, timeoutMs: number, options: RegisterOptions = {}): Promise<V> {
    checkOpen(this.closed, CLOSED);
    const delay = checkDelay(timeoutMs, 'timeoutMs');
    checkOptionsObject(options, 'register() options', '{ signal }');
    if (!onlyKnownOptions(options, REGISTER_OPTIONS)) {
      checkKnownOptions(options, REGISTER_OPTIONS, 'register()');
    }
    const signal = checkSignal(options.signal);
    if (this.rowById.has(id)) {
      throw new TickwheelStateError(
        'ERR_TICKWHEEL_DUPLICATE_ID',
        `request ${nameOf(id)} is already in flight; an id can be registered again once it ` +
          'is resolved, rejected or timed out',
      );
    }
    if (signal?.aborted) return Promise.reject(new AbortError(signal.reason));
    const row = this.rows.allocate();
    const promise = new Promise<V>((resolve) => {
      this.resolvers[row] = resolve as Settle;
    });
    this.ids[row] = id;
    this.timeouts[row] = delay;
    this.rowById.set(id, row);
    try {
      this.timers[row] = this.wheel.schedule(delay, row);
    } catch (err) {
      // A finite timeout no tick of the wheel can hold: nothing stays registered.
      this.forget(row);
      throw err;
    }
    if (signal !== undefined) {
      const listener = () => this.reject(id, new AbortError(signal.reason));
      signal.addEventListener('abort', listener, { once: true });
      this.aborts.set(row, { signal, listener });
    }
    return promise;
  }

  /** Fulfils request `id` with `value`. False if it is not in flight (answered, timed out). */
  resolve(id: K, value: V): boolean {
    const settle = this.take(id);
    settle?.(value);
    return settle !== undefined;
  }

  /** Rejects request `id` with `reason`. False if it is not in flight. */
  reject(id: K, reason: unknown): boolean {
    const settle = this.take(id);
    settle?.(Promise.reject(reason));
    return settle !== undefined;
  }

  has(id: K): boolean {
    return this.rowById.has(id);
  }

  /** Clock time at which request `id` times out (rounded up to its tick), or undefined. */
  deadline(id: K): number | undefined {
    const row = this.rowById.get(id);
    return row === undefined ? undefined : this.wheel.deadline(this.timers[row]);
  }

  get size(): number {
    return this.rowById.size;
  }

  /** Rejects every request in flight (ERR_TICKWHEEL_CLOSED, or `reason`); closes the registry. */
  close(reason?: unknown): void {
    if (this.closed) return;
    this.closed = true;
    const error =
      reason ??
      new TickwheelStateError(
        'ERR_TICKWHEEL_CLOSED',
        'the DeadlineRegistry was closed while the request was in flight',
      );
    for (const id of [...this.rowById.keys()]) this.reject(id, error);
    this.wheel.close();
  }

  private expire(row: number): void {
    const resolve = this.resolvers[row] as Settle;
    const timeoutMs = this.timeouts[row];
    const message = `request ${nameOf(this.ids[row])} timed out after ${timeoutMs} ms`;
    const error = stackless(() => new TimeoutError(message, timeoutMs));
    this.forget(row);
    resolve(Promise.reject(error));
  }

  /** Takes request `id` out of flight, its timer cleared: its resolve function, if it was in. */
  private take(id: K): Settle | undefined {
    const row = this.rowById.get(id);
    if (row === undefined) return undefined;
    const settle = this.resolvers[row] as Settle;
    this.wheel.clearTimeout(this.timers[row]);
    this.forget(row);
    return settle;
  }

  /** Its timer is already gone or cleared. */
  private forget(row: number): void {
    this.rowById.delete(this.ids[row] as K);
    this.ids[row] = undefined;
    this.resolvers[row] = undefined;
    const abort = this.aborts.get(row);
    if (abort !== undefined) {
      abort.signal.removeEventListener('abort', abort.listener);
      this.aborts.delete(row);
    }
    this.rows.release(row);
  }
}

function nameOf(id: unknown): string {
  return typeof id === 'string' ? JSON.stringify(id) : String(id);
}

export interface WithDeadlineOptions {
  /** Aborting it rejects with an AbortError and aborts the work's signal. */
  signal?: AbortSignal;
  /** The wheel to time on. Default: one shared TimerWheel on the shared SystemClock. */
  timers?: TimerWheel;
}

let sharedTimers: TimerWheel | undefined;

/** Undefined, or anything with a wheel's setTimeout and clearTimeout. */
function checkTimers(timers: unknown): TimerWheel | undefined {
  if (timers === undefined) return undefined;
  const wheel = timers as Partial<TimerWheel> | null;
  if (
    typeof wheel !== 'object' ||
    wheel === null ||
    typeof wheel.setTimeout !== 'function' ||
    typeof wheel.clearTimeout !== 'function'
  ) {
    throw invalidOption(`timers must be a TimerWheel, got ${describe(timers)}`);
  }
  return timers as TimerWheel;
}

/**
 * Settles like `work`, unless `ms` pass first: then rejects with a TimeoutError. `work` is a
 * promise, or a function given an AbortSignal that aborts on timeout or with `options.signal`:
 *
 *     const body = await withDeadline((signal) => fetch(url, { signal }), 2_000);
 */
export function withDeadline<V>(
  work: PromiseLike<V> | ((signal: AbortSignal) => PromiseLike<V> | V),
  ms: number,
  options: WithDeadlineOptions = {},
): Promise<V> {
  if (typeof work !== 'function' && !isThenable(work)) {
    throw new TickwheelTypeError(
      'ERR_TICKWHEEL_INVALID_CALLBACK',
      `work must be a promise, or a function given an AbortSignal, got ${describe(work)}`,
    );
  }
  const delay = checkDelay(ms, 'ms');
  checkOptionsObject(options, 'withDeadline options', '{ signal }');
  checkKnownOptions(options, WITH_DEADLINE_OPTIONS, 'withDeadline()');
  const signal = checkSignal(options.signal);
  const timers = checkTimers(options.timers) ?? (sharedTimers ??= new TimerWheel());
  if (signal?.aborted) return Promise.reject(new AbortError(signal.reason));
  const controller = typeof work === 'function' ? new AbortController() : undefined;
  let resolve!: (value: V) => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<V>((onResolve, onReject) => {
    resolve = onResolve;
    reject = onReject;
  });
  let decided = false;
  let timer: TimerHandle = 0;
  const decide = (): boolean => {
    if (decided) return false;
    decided = true;
    timers.clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
    return true;
  };
  const onAbort = () => {
    if (!decide()) return;
    const error = new AbortError(signal?.reason);
    controller?.abort(signal?.reason);
    reject(error);
  };
  // Outside the promise: a delay no tick can hold, or a closed wheel, throws, as a bad ms does.
  timer = timers.setTimeout(() => {
    if (!decide()) return;
    const error = stackless(
      () => new TimeoutError(`the operation timed out after ${delay} ms`, delay),
    );
    controller?.abort(error);
    reject(error);
  }, delay);
  signal?.addEventListener('abort', onAbort, { once: true });
  let pending: PromiseLike<V> | V;
  try {
    pending = typeof work === 'function' ? work((controller as AbortController).signal) : work;
  } catch (err) {
    if (decide()) reject(err);
    return promise;
  }
  Promise.resolve(pending).then(
    (value) => {
      if (decide()) resolve(value);
    },
    (err: unknown) => {
      if (decide()) reject(err);
    },
  );
  return promise;
}
