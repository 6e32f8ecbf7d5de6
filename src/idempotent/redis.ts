/**
 * The Valkey/Redis idempotency store: a key is claimed with an expiry while the handler runs
 * (`SET key <claim> NX PX claimMs GET`: the old value says done or busy), marked done after
 * (`SET key done PX retentionMs GET`: the old value says whether the claim held), and deleted
 * if the handler fails. Not atomic: a worker killed between effect and mark runs it again.
 */

import { randomUUID } from 'node:crypto';
import type { Valkey } from '../valkey/connection.js';
import { REDIS_IDEMPOTENCY_STORE, checkClusterPeer } from '../valkey/peer.js';
import { checkOpen, TickwheelStateError } from '../errors.js';
import {
  checkOption,
  checkKnownOptions,
  describe,
  invalidOption,
  optionNames,
} from '../validate.js';
import {
  checkKey,
  emptyStats,
  type IdempotencyStats,
  type IdempotencyStore,
  type Outcome,
} from './types.js';

export interface RedisIdempotencyOptions {
  /** redis:// or rediss:// URLs (a standalone server, or Cluster nodes), or one redis+sentinel://. */
  redis: string | readonly string[];
  /** Prepended to every key. Default `tickwheel:idem:`. */
  prefix?: string;
  /** How long a claim holds while the handler runs; longer than the slowest handler. Default 60 s. */
  claimMs?: number;
  /** How long a done key is kept (see the PostgreSQL store). Default 30 days; at least 1 hour. */
  retentionMs?: number;
  /** Wait for another's claim before ERR_TICKWHEEL_IDEMPOTENT_BUSY. Default 5 s; 0: at once. */
  busyWaitMs?: number;
}

const DONE = 'done';
const HOUR = 3_600_000;
/** Deletes KEYS[1] if it still holds ARGV[1]: a failed handler lets go of its own claim only. */
const RELEASE =
  "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

const REDIS_STORE_OPTIONS = optionNames<RedisIdempotencyOptions>({
  redis: true,
  prefix: true,
  claimMs: true,
  retentionMs: true,
  busyWaitMs: true,
});

export class RedisIdempotencyStore implements IdempotencyStore<Record<string, never>> {
  private readonly counts = emptyStats();
  private closed = false;

  private constructor(
    private readonly valkey: Valkey,
    private readonly settings: Required<Omit<RedisIdempotencyOptions, 'redis'>>,
  ) {}

  static async open(options: RedisIdempotencyOptions): Promise<RedisIdempotencyStore> {
    // Options first: a bad one must not leave a connection open.
    const probe = { ...options };
    checkKnownOptions(probe, REDIS_STORE_OPTIONS, 'RedisIdempotencyStore.open()');
    if (probe.prefix !== undefined && typeof probe.prefix !== 'string') {
      throw invalidOption(`prefix must be a string, got ${describe(probe.prefix)}`);
    }
    const settings = {
      prefix: probe.prefix ?? 'tickwheel:idem:',
      claimMs: checkOption(probe.claimMs ?? 60_000, 'claimMs', 1, 2 ** 31 - 1, true),
      retentionMs: checkOption(probe.retentionMs ?? 30 * 24 * HOUR, 'retentionMs', HOUR),
      busyWaitMs: checkOption(probe.busyWaitMs ?? 5_000, 'busyWaitMs', 0, 2 ** 31 - 1),
    };
    // @redis/client is an optional peer: loaded only here, so the PostgreSQL store needs none.
    checkClusterPeer(REDIS_IDEMPOTENCY_STORE);
    const { Valkey } = await import('../valkey/connection.js');
    const valkey = await Valkey.connect(options?.redis);
    return new RedisIdempotencyStore(valkey, settings);
  }

  async once(key: string, effect: (context: Record<string, never>) => unknown): Promise<Outcome> {
    checkOpen(this.closed, 'this idempotency store is closed');
    checkKey(key);
    const { prefix, claimMs, retentionMs, busyWaitMs } = this.settings;
    const at = prefix + key;
    const claim = `claim:${randomUUID()}`;
    const giveUpAt = Date.now() + busyWaitMs;
    const claiming = ['SET', at, claim, 'NX', 'PX', String(claimMs), 'GET'];
    for (let pause = 10; ; pause = Math.min(pause * 2, 200)) {
      const before = await this.valkey.command(at, claiming);
      if (before === null || before === undefined) break;
      if (before === DONE) {
        this.counts.duplicates++;
        return 'duplicate';
      }
      if (Date.now() + pause > giveUpAt) {
        throw new TickwheelStateError(
          'ERR_TICKWHEEL_IDEMPOTENT_BUSY',
          `another delivery of ${key} is running (its claim holds for up to ${claimMs} ms)`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, pause));
    }
    try {
      await effect({});
    } catch (err) {
      this.counts.failed++;
      await this.valkey.command(at, ['EVAL', RELEASE, '1', at, claim]).catch(() => {
        // The claim expires by itself.
      });
      throw err;
    }
    const held = await this.valkey.command(at, ['SET', at, DONE, 'PX', String(retentionMs), 'GET']);
    if (held !== claim) this.counts.claimsExpired++;
    this.counts.ran++;
    return 'ran';
  }

  stats(): IdempotencyStats {
    return { ...this.counts };
  }

  /** Closes its connection; a second call does nothing. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.valkey.close();
  }
}
