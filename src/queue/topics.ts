/**
 * Topic controls, obeyed by every receive of every backend through a TopicGate: `paused`,
 * `push` (push.ts), `rateLimit` (a token bucket: a receive takes at most as many messages as
 * whole tokens, waits for the next within its long poll, and gives back what it did not use).
 * Settings are durable and apply once stored; a change wakes the receives waiting on the topic.
 */

import { mayHaveWritten, TickwheelCorruptError, TickwheelStateError } from '../errors.js';
import { checkFlag, checkOption, describe } from '../validate.js';
import { fieldsOf } from './message.js';
import { checkPushTarget, pushView, samePushTarget, type PushTarget } from './push.js';
import type { Store } from './store.js';
import type { RateLimit, TopicInfo } from '../protocol/model.js';

export type { RateLimit, PushTargetInput, TopicUpdate, TopicInfo } from '../protocol/model.js';

export interface TopicSettings {
  paused: boolean;
  rateLimit: RateLimit | null;
  push: PushTarget | null;
}

export const DEFAULT_TOPIC_SETTINGS: Readonly<TopicSettings> = Object.freeze({
  paused: false,
  rateLimit: null,
  push: null,
});

export const MAX_RATE_PER_SECOND = 1_000_000;
export const MIN_RATE_PER_SECOND = 0.001;
export const MAX_BURST = 1_000_000;

/** Checks a TopicUpdate: every bad value is ERR_TICKWHEEL_INVALID_OPTION naming the field. */
export function checkTopicUpdate(update: unknown): Partial<TopicSettings> {
  const given = fieldsOf(
    update,
    ['paused', 'rateLimit', 'push'],
    'topic settings',
    '{ paused: true }',
  );
  const checked: Partial<TopicSettings> = {};
  if (given.paused !== undefined) checked.paused = checkFlag(given.paused, 'paused');
  if (given.rateLimit !== undefined) checked.rateLimit = checkRateLimit(given.rateLimit);
  if (given.push !== undefined) checked.push = checkPushTarget(given.push);
  return checked;
}

function checkRateLimit(limit: unknown): RateLimit | null {
  if (limit === null) return null;
  const given = fieldsOf(
    limit,
    ['perSecond', 'burst'],
    'rateLimit',
    '{ perSecond, burst? } or null (no limit)',
  );
  const perSecond = checkOption(
    given.perSecond,
    'rateLimit.perSecond',
    MIN_RATE_PER_SECOND,
    MAX_RATE_PER_SECOND,
  );
  const burst =
    given.burst === undefined
      ? Math.max(1, Math.ceil(perSecond))
      : checkOption(given.burst, 'rateLimit.burst', 1, MAX_BURST, true);
  return { perSecond, burst };
}

export function applyTopicUpdate(
  settings: TopicSettings,
  update: Partial<TopicSettings>,
): TopicSettings {
  return {
    paused: update.paused ?? settings.paused,
    rateLimit: update.rateLimit === undefined ? settings.rateLimit : update.rateLimit,
    push: update.push === undefined ? settings.push : update.push,
  };
}

export function isDefaultSettings(settings: TopicSettings): boolean {
  return !settings.paused && settings.rateLimit === null && settings.push === null;
}

/** A topic's settings as read back: the push target without its secrets. */
export function settingsView(
  settings: TopicSettings,
): Omit<TopicInfo, 'topic' | 'pending' | 'dead'> {
  return { paused: settings.paused, rateLimit: settings.rateLimit, push: pushView(settings.push) };
}

/**
 * Reads stored settings back: `{ paused, rateLimit, push? }` (an absent push is none); anything
 * else is ERR_TICKWHEEL_CORRUPT, never silently "not paused".
 */
export function parseStoredSettings(value: unknown, where: string): TopicSettings {
  const unreadable = (reason: string) =>
    new TickwheelCorruptError(`${where}: stored topic settings cannot be read (${reason})`);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw unreadable(`not an object: ${describe(value)}`);
  }
  const given = value as Record<string, unknown>;
  if (typeof given.paused !== 'boolean' || !('rateLimit' in given)) {
    throw unreadable('paused (true or false) and rateLimit (an object or null) are both needed');
  }
  try {
    const update = checkTopicUpdate('push' in given ? given : { ...given, push: null });
    return applyTopicUpdate(DEFAULT_TOPIC_SETTINGS, update);
  } catch (err) {
    throw unreadable((err as Error).message);
  }
}

/** A stored push target, or ERR_TICKWHEEL_CORRUPT naming the rule (never a secret). */
export function parseStoredPush(value: unknown, where: string): PushTarget {
  const unreadable = (reason: string) =>
    new TickwheelCorruptError(`${where}: stored push target cannot be read (${reason})`);
  if (value === null) throw unreadable('null');
  try {
    return checkPushTarget(value) as PushTarget;
  } catch (err) {
    throw unreadable((err as Error).message);
  }
}

export interface TopicSettingsBackend {
  load(): Promise<Map<string, TopicSettings>>;
  /** Stores one topic's settings (`update`: the fields changed); resolves once durable. */
  save(topic: string, settings: TopicSettings, update: Partial<TopicSettings>): Promise<void>;
}

/** Settings kept by the embedded queue's store (in its data directory, for the file store). */
export function storeSettings(
  store: Pick<Store, 'readTopicSettings' | 'writeTopicSettings'>,
): TopicSettingsBackend {
  let stored = new Map<string, TopicSettings>();
  return {
    async load() {
      stored = await store.readTopicSettings();
      return new Map(stored);
    },
    async save(topic, settings) {
      const next = new Map(stored);
      if (isDefaultSettings(settings)) next.delete(topic);
      else next.set(topic, settings);
      await store.writeTopicSettings(next);
      stored = next;
    },
  };
}

/** Whole tokens taken; `retryInMs`: with none granted, until the next one. */
type Grant = { granted: number; retryInMs: number };

export interface TokenBuckets {
  take(topic: string, limit: RateLimit, want: number): Grant | Promise<Grant>;
  refund(topic: string, limit: RateLimit, count: number): void | Promise<void>;
}

/**
 * Token buckets in this process. A changed limit keeps the tokens saved up (at most the new
 * burst); a refund made under another limit than the bucket's is dropped.
 */
export class LocalBuckets implements TokenBuckets {
  private readonly buckets = new Map<string, { tokens: number; at: number; limit: RateLimit }>();

  constructor(private readonly now: () => number) {}

  take(topic: string, limit: RateLimit, want: number): Grant {
    const bucket = this.refill(topic, limit);
    const granted = Math.min(want, Math.floor(bucket.tokens));
    bucket.tokens -= granted;
    const retryInMs =
      granted > 0 ? 0 : Math.max(1, Math.ceil(((1 - bucket.tokens) * 1000) / limit.perSecond));
    return { granted, retryInMs };
  }

  refund(topic: string, limit: RateLimit, count: number): void {
    const bucket = this.buckets.get(topic);
    if (bucket === undefined || !sameLimit(bucket.limit, limit)) return;
    this.refill(topic, limit);
    bucket.tokens = Math.min(limit.burst, bucket.tokens + count);
  }

  forget(topic: string): void {
    this.buckets.delete(topic);
  }

  private refill(topic: string, limit: RateLimit): { tokens: number; at: number } {
    const now = this.now();
    let bucket = this.buckets.get(topic);
    if (bucket === undefined) {
      // A new bucket starts full, as a new topic's does.
      bucket = { tokens: limit.burst, at: now, limit };
      this.buckets.set(topic, bucket);
      return bucket;
    }
    if (!sameLimit(bucket.limit, limit)) {
      bucket.limit = limit;
      bucket.tokens = Math.min(bucket.tokens, limit.burst);
    }
    if (now > bucket.at) {
      bucket.tokens = Math.min(
        limit.burst,
        bucket.tokens + ((now - bucket.at) * limit.perSecond) / 1000,
      );
      bucket.at = now;
    }
    return bucket;
  }
}

function sameLimit(a: RateLimit | null, b: RateLimit | null): boolean {
  return a?.perSecond === b?.perSecond && a?.burst === b?.burst;
}

export type Sleep = (ms: number, signal: AbortSignal) => Promise<void>;

/**
 * A queue's receive as the gate uses it: its long poll must end empty, once woken, if the
 * topic's settings changed meanwhile (`generation`). `waitReady` takes nothing (holds no tokens).
 */
export interface InnerQueue<T> {
  receive(max: number, waitMs: number): Promise<T[]>;
  waitReady(ms: number, signal: AbortSignal): Promise<void>;
}

export class TopicGate {
  /**
   * Topics with settings of their own, at most: each is kept in memory and written again with
   * the others at every change (tests change it).
   */
  static maxWithSettings = 10_000;

  /** Topics with settings of their own (one back at the defaults has no entry). */
  private settings = new Map<string, TopicSettings>();
  /**
   * Per topic with settings of its own, the count of changes (of any topic) at its last change
   * (see InnerQueue): never the same number twice, so a topic that leaves and comes back has
   * another, and one at the defaults needs no entry (0).
   */
  private readonly generations = new Map<string, number>();
  private changes = 0;
  /** The gate's own waits per topic, ended when its settings change or the gate closes. */
  private readonly watchers = new Map<string, Set<AbortController>>();
  /** Told of every change of a topic's settings, after it is applied (see listen()). */
  private readonly listeners: Array<(topic: string, settings: TopicSettings) => void> = [];
  /** Checks where a push target being set may point (the PushGuard); rejects to refuse it. */
  vetPush: (target: PushTarget) => Promise<void> = async () => {};
  /** Saves in order: a later change of a topic never lands before an earlier one. */
  private saving: Promise<unknown> = Promise.resolve();
  private closed = false;

  constructor(
    private readonly backend: TopicSettingsBackend,
    private readonly buckets: TokenBuckets & { forget?(topic: string): void },
    private readonly now: () => number,
    private readonly sleep: Sleep,
    private readonly onChange: (topic: string) => void,
    /** Failures that must not fail a receive (giving tokens back): the queue's faults. */
    private readonly onError: (err: unknown) => void,
  ) {}

  async load(): Promise<void> {
    this.replace(await this.backend.load());
  }

  all(): Map<string, TopicSettings> {
    return new Map(this.settings);
  }

  has(topic: string): boolean {
    return this.settings.has(topic);
  }

  get(topic: string): TopicSettings {
    return this.settings.get(topic) ?? DEFAULT_TOPIC_SETTINGS;
  }

  /** Calls `listener` after each change of a topic's settings (stored here or read again). */
  listen(listener: (topic: string, settings: TopicSettings) => void): void {
    this.listeners.push(listener);
  }

  /**
   * A number that changes with every change of the topic's settings, 0 at the defaults: a long
   * poll that sees it move ends empty. (One that sees it back at 0 may take: the topic has no
   * settings to obey by then.)
   */
  generation(topic: string): number {
    return this.generations.get(topic) ?? 0;
  }

  /** Stores and applies a checked change; resolves with the topic's settings once durable. */
  update(topic: string, checked: Partial<TopicSettings>): Promise<TopicSettings> {
    // Started at once, awaited in turn: the saves keep the order of the calls.
    const vetted = checked.push ? this.vetPush(checked.push) : undefined;
    vetted?.catch(() => undefined);
    const run = this.saving.then(async () => {
      await vetted;
      const next = applyTopicUpdate(this.get(topic), checked);
      if (sameSettings(next, this.get(topic))) return next;
      const most = TopicGate.maxWithSettings;
      if (!this.settings.has(topic) && this.settings.size >= most) {
        throw new TickwheelStateError(
          'ERR_TICKWHEEL_CONFLICT',
          `${most} topics have settings of their own (paused, a rate limit or a push target), the most a queue keeps: put one back to the defaults before giving topic ${topic} any`,
        );
      }
      try {
        await this.backend.save(topic, next, checked);
      } catch (err) {
        throw mayHaveWritten(err, topic);
      }
      this.set(topic, next);
      return next;
    });
    this.saving = run.catch(() => undefined);
    return run;
  }

  /** Settings read again from a shared backend: changed topics wake their receives. */
  replace(all: Map<string, TopicSettings>): void {
    for (const topic of [...this.settings.keys()]) {
      if (!all.has(topic)) this.set(topic, DEFAULT_TOPIC_SETTINGS);
    }
    for (const [topic, settings] of all) this.set(topic, settings);
  }

  private set(topic: string, settings: TopicSettings): void {
    if (sameSettings(this.get(topic), settings)) return;
    if (isDefaultSettings(settings)) {
      this.settings.delete(topic);
      this.generations.delete(topic);
    } else {
      this.settings.set(topic, settings);
      this.generations.set(topic, ++this.changes);
    }
    if (settings.rateLimit === null) this.buckets.forget?.(topic);
    for (const controller of this.watchers.get(topic) ?? []) controller.abort();
    this.onChange(topic);
    for (const listener of this.listeners) listener(topic, settings);
  }

  /** A receive through the gate: limited topics take tokens first, and wait holding none. */
  async receive<T>(
    topic: string,
    max: number,
    waitMs: number,
    signal: AbortSignal | undefined,
    inner: InnerQueue<T>,
  ): Promise<T[]> {
    const until = waitMs > 0 ? this.now() + waitMs : 0;
    if (!this.settings.has(topic)) {
      // The common case, a topic with default settings: one Map lookup. A long poll ended by a
      // change of the topic's settings carries on below.
      const got = await inner.receive(max, waitMs);
      if (got.length > 0 || waitMs === 0 || !this.settings.has(topic)) return got;
    }
    for (;;) {
      if (signal?.aborted || this.closed) return [];
      const settings = this.get(topic);
      const left = Math.max(0, until - this.now());
      if (settings.paused) {
        if (left === 0) return [];
        await this.wait(topic, signal, (aborts) => this.sleep(left, aborts));
        continue;
      }
      const limit = settings.rateLimit;
      if (limit === null) {
        const got = await inner.receive(max, left);
        if (got.length > 0 || left === 0 || this.now() >= until) return got;
        continue;
      }
      const { granted, retryInMs } = await this.buckets.take(topic, limit, max);
      // Paused (or closed) while the tokens were asked for: give them back, look again.
      if (granted > 0 && (this.closed || this.get(topic).paused)) {
        await this.refund(topic, limit, granted);
        continue;
      }
      if (granted === 0) {
        if (left === 0) return [];
        await this.wait(topic, signal, (aborts) => this.sleep(Math.min(left, retryInMs), aborts));
        continue;
      }
      let got: T[] = [];
      try {
        // Only what is ready now: a wait must not hold tokens the bucket would refill meanwhile.
        got = await inner.receive(granted, 0);
      } finally {
        if (got.length < granted) await this.refund(topic, limit, granted - got.length);
      }
      if (got.length > 0 || left === 0) return got;
      await this.wait(topic, signal, (aborts) => inner.waitReady(left, aborts));
    }
  }

  /** Gives tokens back; a failure is reported, never fails the receive (it has messages). */
  private async refund(topic: string, limit: RateLimit, count: number): Promise<void> {
    try {
      await this.buckets.refund(topic, limit, count);
    } catch (err) {
      this.onError(err);
    }
  }

  /** Runs `waiting` with a signal that aborts on a change of the topic, `signal`, or close. */
  private async wait(
    topic: string,
    signal: AbortSignal | undefined,
    waiting: (aborts: AbortSignal) => Promise<void>,
  ): Promise<void> {
    const controller = new AbortController();
    const onAbort = () => controller.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    let set = this.watchers.get(topic);
    if (set === undefined) this.watchers.set(topic, (set = new Set()));
    set.add(controller);
    try {
      if (!this.closed && !signal?.aborted) await waiting(controller.signal);
    } finally {
      set.delete(controller);
      if (set.size === 0 && this.watchers.get(topic) === set) this.watchers.delete(topic);
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /** Ends every wait of the gate (they answer empty) and every later receive; once. */
  close(): void {
    this.closed = true;
    for (const set of this.watchers.values()) for (const controller of set) controller.abort();
  }

  async settled(): Promise<void> {
    await this.saving;
  }
}

function sameSettings(a: TopicSettings, b: TopicSettings): boolean {
  return (
    a.paused === b.paused && sameLimit(a.rateLimit, b.rateLimit) && samePushTarget(a.push, b.push)
  );
}
