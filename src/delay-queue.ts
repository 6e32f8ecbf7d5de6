/**
 * `tickwheel/queue`, the durable delay queue (the README shows it in use): the composition
 * root above src/queue, the checked facade over the embedded engine on a store, or over a node on
 * Valkey/Redis (`redis`: its code and @redis/client imported only then) or on PostgreSQL
 * (`postgres`: its code and pg imported only then).
 */

import type { ClusterQueueOptions } from './cluster/backend.js';
import type { PostgresQueueOptions } from './postgres/backend.js';
import { checkClusterPeer } from './valkey/peer.js';
import { checkKnownOptions, describe, invalidOption, optionNames } from './validate.js';
import { CheckedQueue } from './queue/checked-queue.js';
import { QueueEngine } from './queue/engine.js';
import { QueueReport } from './queue/report.js';
import { checkEmbeddedOptions, checkQueueOptions } from './queue/options.js';
import type { Store } from './queue/store.js';
import type { DelayQueueOptions, QueueOptions } from './queue/types.js';
import { FileStore, type FileStoreOptions } from './store/file/file-store.js';
import { FILE_STORE_OPTIONS } from './store/file/options.js';
import { MemoryStore } from './store/memory-store.js';

export interface DelayQueueOpenOptions
  extends DelayQueueOptions, Partial<Omit<FileStoreOptions, 'dir' | 'logIo'>> {
  /** Data directory of the file store. Required unless `store` is given. */
  dir?: string;
  /** Another store: `new MemoryStore()` for a queue without durability. */
  store?: Store;
}

/** Options of a queue on Valkey/Redis: `redis` and the cluster's settings (docs/cluster.md). */
export type DelayQueueRedisOptions = ClusterQueueOptions;

/** Options of a queue on PostgreSQL: `postgres` and the partitioned queue's settings. */
export type DelayQueuePostgresOptions = PostgresQueueOptions;

/** The options of QueueOptions: every queue, embedded or on Valkey/Redis, takes them. */
const QUEUE_OPTIONS = {
  horizonMs: true,
  maxPayloadBytes: true,
  visibilityMs: true,
  maxWaitMs: true,
  push: true,
  onFault: true,
  durableAcks: true,
  maxSchedules: true,
} as const satisfies Record<keyof QueueOptions, true>;

/** Every option of an embedded queue. */
const OPEN_OPTIONS = optionNames<DelayQueueOpenOptions>({
  ...FILE_STORE_OPTIONS,
  ...QUEUE_OPTIONS,
  store: true,
  clock: true,
  payloadMemoryBytes: true,
  rememberFinished: true,
});

/** Every option of a queue on Valkey/Redis. */
const REDIS_OPTIONS = optionNames<DelayQueueRedisOptions>({
  ...QUEUE_OPTIONS,
  redis: true,
  queue: true,
  partitions: true,
  windowMs: true,
  durability: true,
  leaseMs: true,
  nodeId: true,
  maxClockSkewMs: true,
  connectTimeoutMs: true,
  onError: true,
});

/** Every option of a queue on PostgreSQL. */
const POSTGRES_OPTIONS = optionNames<DelayQueuePostgresOptions>({
  ...QUEUE_OPTIONS,
  postgres: true,
  queue: true,
  partitions: true,
  windowMs: true,
  leaseMs: true,
  nodeId: true,
  maxClockSkewMs: true,
  fireIntervalMs: true,
  fireAheadMs: true,
  poolSize: true,
  statementTimeoutMs: true,
  connectTimeoutMs: true,
  onError: true,
});

/** The file store's options but onFault, which is the queue's too. */
const DIRECTORY_OPTIONS = Object.keys(FILE_STORE_OPTIONS).filter((name) => name !== 'onFault');

/** Options of the embedded queue that mean nothing for a queue on Valkey/Redis or PostgreSQL. */
const EMBEDDED_ONLY = OPEN_OPTIONS.filter(
  (name) => !REDIS_OPTIONS.includes(name) && !POSTGRES_OPTIONS.includes(name),
);

/** The keys of T that are not optional. */
type RequiredKeys<T> = { [K in keyof T]-?: object extends Pick<T, K> ? never : K }[keyof T];

/** The Store's required methods: a `store` lacking one is refused at open, not later. */
const STORE_METHODS: Record<RequiredKeys<Store>, true> = {
  horizonEnd: true,
  recover: true,
  lookup: true,
  add: true,
  move: true,
  finish: true,
  bury: true,
  loadUntil: true,
  payloadOf: true,
  dead: true,
  counts: true,
  readTopicSettings: true,
  writeTopicSettings: true,
  readSchedules: true,
  writeSchedules: true,
  stats: true,
  close: true,
};

const OPEN_USAGE =
  "{ dir: './data' } for a queue on a data directory, { store: new MemoryStore() } for one in " +
  "memory, { redis: 'redis://host:6379' } for one on Valkey/Redis, or { postgres: " +
  "'postgres://host/db' } for one on PostgreSQL";

/** Checks the `store` option: an object with every method of a Store (MemoryStore, FileStore). */
function checkStore(store: unknown): Store {
  if (typeof store !== 'object' || store === null) {
    throw invalidOption(`store must be a Store such as new MemoryStore(), got ${describe(store)}`);
  }
  const missing = Object.keys(STORE_METHODS).filter(
    (name) => typeof (store as Record<string, unknown>)[name] !== 'function',
  );
  if (missing.length > 0) {
    throw invalidOption(
      `store must be a Store such as new MemoryStore(); the object given lacks ${missing.length === 1 ? 'the method' : 'the methods'} ${missing.join(', ')}`,
    );
  }
  return store as Store;
}

/** A delay queue on a data directory, a store given, or Valkey/Redis: the same API on each. */
export class DelayQueue<Payload = unknown> extends CheckedQueue<Payload> {
  /** Opens (and recovers) a queue, or this process's node of one on Valkey/Redis. */
  static async open<P = unknown>(
    options: DelayQueueOpenOptions | DelayQueueRedisOptions | DelayQueuePostgresOptions,
  ): Promise<DelayQueue<P>> {
    if (typeof options !== 'object' || options === null) {
      throw invalidOption(`DelayQueue.open takes options: ${OPEN_USAGE}; got ${describe(options)}`);
    }
    if ('redis' in options && 'postgres' in options) {
      throw invalidOption('give redis or postgres, not both: a queue lives in one store');
    }
    if ('redis' in options) return DelayQueue.openOnRedis<P>(options);
    if ('postgres' in options) return DelayQueue.openOnPostgres<P>(options);
    return DelayQueue.openEmbedded<P>(options as DelayQueueOpenOptions);
  }

  private static async openEmbedded<P>(options: DelayQueueOpenOptions): Promise<DelayQueue<P>> {
    checkKnownOptions(options, OPEN_OPTIONS, 'DelayQueue.open');
    if (options.store === undefined && options.dir === undefined) {
      throw invalidOption(`DelayQueue.open needs dir or store: ${OPEN_USAGE}`);
    }
    if (options.store !== undefined) {
      checkStore(options.store);
      refuseDirectoryOptions(options);
    }
    const settings = checkEmbeddedOptions(options);
    const store =
      options.store !== undefined
        ? checkStore(options.store)
        : await FileStore.open({
            // An option left undefined is the store's default, as if absent.
            dir: options.dir as string,
            fsync: options.fsync,
            segmentBytes: options.segmentBytes,
            windowMs: options.windowMs,
            checkpointIntervalMs: options.checkpointIntervalMs,
            snapshotBytes: options.snapshotBytes,
            repair: options.repair,
            listScanRecords: options.listScanRecords,
            onFault: settings.onFault,
          });
    try {
      const report = new QueueReport(() => settings.clock.now(), settings.onFault);
      const engine = new QueueEngine(store, settings, report);
      await engine.start();
      // Opened to repair a directory (tickwheel repair): nothing is pushed meanwhile.
      return new DelayQueue<P>(engine, settings, report, options.repair !== true);
    } catch (err) {
      await store.close().catch(() => undefined);
      throw err;
    }
  }

  private static async openOnRedis<P>(options: DelayQueueRedisOptions): Promise<DelayQueue<P>> {
    refuseEmbeddedOnly(options, 'Valkey/Redis (redis)');
    checkKnownOptions(options, REDIS_OPTIONS, 'DelayQueue.open on Valkey/Redis');
    const limits = checkQueueOptions(options);
    checkClusterPeer();
    const cluster = await import('./cluster/backend.js');
    const report = new QueueReport(Date.now, limits.onFault);
    return new DelayQueue<P>(
      await cluster.openClusterBackend(options, limits, report),
      limits,
      report,
    );
  }

  private static async openOnPostgres<P>(
    options: DelayQueuePostgresOptions,
  ): Promise<DelayQueue<P>> {
    refuseEmbeddedOnly(options, 'PostgreSQL (postgres)');
    checkKnownOptions(options, POSTGRES_OPTIONS, 'DelayQueue.open on PostgreSQL');
    const limits = checkQueueOptions(options);
    const postgres = await import('./postgres/backend.js');
    const report = new QueueReport(Date.now, limits.onFault);
    return new DelayQueue<P>(
      await postgres.openPostgresBackend(options, limits, report),
      limits,
      report,
    );
  }
}

/** The data directory's options beside a store of the caller's, where they would do nothing. */
function refuseDirectoryOptions(options: DelayQueueOpenOptions): void {
  for (const name of DIRECTORY_OPTIONS) {
    if ((options as Record<string, unknown>)[name] !== undefined) {
      throw invalidOption(
        name === 'dir'
          ? 'give dir or store, not both: the queue lives in one of them'
          : `${name} is an option of the data directory (dir); a queue on the store given does not take it`,
      );
    }
  }
}

/** An option of the embedded queue given to a queue in a shared store: refused by its name. */
function refuseEmbeddedOnly(options: object, store: string): void {
  for (const name of EMBEDDED_ONLY) {
    if ((options as Record<string, unknown>)[name] !== undefined) {
      throw invalidOption(
        `${name} is an option of the embedded queue; a queue on ${store} does not take it`,
      );
    }
  }
}

export { FileStore, MemoryStore, type FileStoreOptions };
export type { ClusterQueueOptions, PostgresQueueOptions };
// No I/O and no @redis/client behind it: the error of a cluster node refused at open.
export { TickwheelNoReplicaError, type DurabilityOption } from './cluster/durability.js';
export type { Queue, QueueOperations } from './queue/api.js';
export * from './queue/index.js';
export type { FsyncPolicy } from './store/log/index.js';
