/**
 * The options of createServer(), and their checks: every bound and default of the server is
 * here, so that a bad option fails createServer() before anything is opened.
 */

import { TickwheelTypeError } from '../errors.js';
import { MAX_WAIT_MS } from '../protocol/limits.js';
import type { DelayQueueOpenOptions, DelayQueueRedisOptions, FsyncPolicy } from '../delay-queue.js';
import type { Queue } from '../queue/api.js';
import { checkOption } from '../validate.js';
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
  /**
   * Instead of `dir`: Valkey/Redis URL(s) of a queue shared by many servers (docs/cluster.md);
   * the server opens this process's node of it. Cluster settings go in `cluster`.
   */
  redis?: string | string[];
  /** Settings of the node the server opens with `redis` (queue name, partitions, durability). */
  cluster?: Omit<DelayQueueRedisOptions, 'redis'>;
  /** fsync policy of the queue the server opens. Default 'batch'. */
  fsync?: FsyncPolicy;
  /**
   * Further options for the queue the server opens (horizonMs, visibilityMs, ...). Its
   * background faults are logged by the server's logger unless `onFault` is given here.
   */
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
   * Resolve before the queue is open (it is recovered in the background); until then the
   * server answers 503 (plugins/lifecycle.ts). The data directory is locked before
   * createServer() resolves either way. Default false: resolve once the queue is open.
   */
  openInBackground?: boolean;
  /**
   * The Host names (besides localhost and IP addresses) the server answers to; other names get
   * 421, as a page using DNS rebinding would send, token or not (origin.ts).
   */
  allowedHosts?: string[];
  /**
   * Time a connection has to send a whole request, headers and body, from when it opens or the
   * request starts; slower ones get 408 and are closed. Default 30,000.
   */
  requestTimeoutMs?: number;
  /**
   * Most connections open at once. At the cap, the connection that has waited longest without
   * sending a whole request is closed to make room for a new one (src/server/connections.ts).
   * Default: from the process's file limit, leaving a quarter of it (at least 128) to the
   * store; between 16 and 4096.
   */
  maxConnections?: number;
  /**
   * Topics that get a `topic` label of their own in /metrics: the first this many seen since
   * start; the series of later ones are summed under `topic="_other"`, so clients inventing
   * topic names cannot grow the metrics without bound. Default 100, 1 to 10,000.
   */
  metricsTopics?: number;
}

/** The server's own options, checked, with their defaults. */
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
    metricsTopics: integer('metricsTopics', DEFAULT_METRICS_TOPICS, 1, 10_000),
  };
}

type IntegerOption = 'bodyLimit' | 'requestTimeoutMs' | 'maxConnections' | 'metricsTopics';

function checkLogLevel(level: unknown): LogLevel {
  if (!LOG_LEVELS.includes(level as LogLevel)) {
    throw new TickwheelTypeError(
      'ERR_TICKWHEEL_INVALID_OPTION',
      `logLevel must be one of ${LOG_LEVELS.join(', ')}; got ${String(level)}`,
    );
  }
  return level as LogLevel;
}
