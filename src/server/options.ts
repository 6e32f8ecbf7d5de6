/** createServer()'s options and their checks: every bound and default of the server. */

import { MAX_TOPIC_PAGE, MAX_WAIT_MS } from '../protocol/limits.js';
import type {
  DelayQueueOpenOptions,
  DelayQueuePostgresOptions,
  DelayQueueRedisOptions,
  FsyncPolicy,
} from '../delay-queue.js';
import type { Queue } from '../queue/api.js';
import { checkOption, invalidOption } from '../validate.js';
import { checkToken } from './auth.js';
import { defaultMaxConnections } from './connections.js';
import { checkAllowedHosts } from './origin.js';
import {
  DEFAULT_BODY_LIMIT,
  DEFAULT_MAX_WAIT_MS,
  DEFAULT_METRICS_TOPICS,
  DEFAULT_REQUEST_TIMEOUT_MS,
  LOG_LEVELS,
  type LogLevel,
} from './settings.js';

export interface ServerOptions {
  /** A queue you opened (or are opening). The server uses it and leaves closing it to you. */
  queue?: Queue | Promise<Queue>;
  /** Data directory of the queue the server opens (and closes on close()), when no `queue`. */
  dir?: string;
  /** Instead of `dir`: Valkey/Redis URL(s) of a queue shared by many servers (docs/cluster.md). */
  redis?: string | string[];
  /** Instead of `dir`: a PostgreSQL connection string (or pg.Pool) of a queue shared by many servers. */
  postgres?: DelayQueuePostgresOptions['postgres'];
  /**
   * Settings of the node the server opens with `redis` (queue name, partitions, durability) or
   * `postgres` (queue name, partitions, pool size).
   */
  cluster?: Omit<DelayQueueRedisOptions, 'redis'> | Omit<DelayQueuePostgresOptions, 'postgres'>;
  /** fsync policy of the queue the server opens. Default 'batch'. */
  fsync?: FsyncPolicy;
  /** Further options of the queue the server opens; its faults are logged unless `onFault`. */
  queueOptions?: Omit<DelayQueueOpenOptions, 'dir' | 'fsync'>;
  /** When set, every /v1 request needs `Authorization: Bearer <token>`. */
  token?: string;
  /** Largest request body in bytes; larger ones get 413. Default 1 MiB. */
  bodyLimit?: number;
  /** Longest long poll of a receive, in ms; larger waitMs are capped to it. Default 20,000. */
  maxWaitMs?: number;
  /** Pino log level of the server's structured logs (JSON lines). Default 'warn'. */
  logLevel?: LogLevel;
  /** Where the JSON log lines go. Default: stdout. */
  logStream?: { write(line: string): unknown };
  /**
   * Resolve once the data directory is locked, before the queue is open (it recovers in the
   * background, the server answering 503 meanwhile). Default false.
   */
  openInBackground?: boolean;
  /** Host names the server answers to besides localhost and IP addresses; others get 421. */
  allowedHosts?: string[];
  /** Time a connection has to send a whole request; slower ones get 408. Default 30,000. */
  requestTimeoutMs?: number;
  /**
   * Most connections open at once; at the cap, the one that has waited longest without a whole
   * request is closed to make room. Default: from the file limit, 16 to 4096.
   */
  maxConnections?: number;
  /** Topics with a `topic` label of their own in /metrics (1 to 1,000), the rest summed. Default 100. */
  metricsTopics?: number;
}

export type ServerSettings = ReturnType<typeof checkServerOptions>;

export function checkServerOptions(options: ServerOptions) {
  const integer = (name: IntegerOption, fallback: number, min: number, max: number) =>
    checkOption(options[name] ?? fallback, name, min, max, true);
  return {
    bodyLimit: integer('bodyLimit', DEFAULT_BODY_LIMIT, 1024, 1024 ** 3),
    maxWaitMs: checkOption(options.maxWaitMs ?? DEFAULT_MAX_WAIT_MS, 'maxWaitMs', 0, MAX_WAIT_MS),
    token: options.token === undefined ? undefined : checkToken(options.token),
    logLevel: checkLogLevel(options.logLevel ?? 'warn'),
    allowedHosts: options.allowedHosts === undefined ? [] : checkAllowedHosts(options.allowedHosts),
    requestTimeoutMs: integer('requestTimeoutMs', DEFAULT_REQUEST_TIMEOUT_MS, 100, 3_600_000),
    maxConnections: integer('maxConnections', defaultMaxConnections(), 1, 1_000_000),
    metricsTopics: integer('metricsTopics', DEFAULT_METRICS_TOPICS, 1, MAX_TOPIC_PAGE),
  };
}

type IntegerOption = 'bodyLimit' | 'requestTimeoutMs' | 'maxConnections' | 'metricsTopics';

function checkLogLevel(level: unknown): LogLevel {
  if (!LOG_LEVELS.includes(level as LogLevel)) {
    throw invalidOption(`logLevel must be one of ${LOG_LEVELS.join(', ')}; got ${String(level)}`);
  }
  return level as LogLevel;
}
