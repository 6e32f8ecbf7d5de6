/**
 * A node of a queue on PostgreSQL (docs/postgres.md): its options, and the path that opens it.
 * Makes or brings up to date the queue's schema (PostgresDriver.open), reads the queue's fixed
 * settings as the first node wrote them, and starts a PartitionedBackend over the driver. A
 * PostgreSQL that is not there yet is tried again until `connectTimeoutMs` (reach.ts).
 */

import { PartitionedBackend } from '../partitioned/backend.js';
import {
  checkNodeOptions,
  type NodeSettings,
  type PartitionedQueueOptions,
} from '../partitioned/node-options.js';
import type { QueueLimits } from '../queue/options.js';
import type { QueueReport } from '../queue/report.js';
import { checkOption, hidePassword } from '../validate.js';
import { PostgresDriver } from './driver.js';
import { checkPoolOptions } from './pool-settings.js';
import { loadPg, type PgPool } from './pg.js';
import { checkConnectionString, probe, untilReachable } from './reach.js';

/**
 * The node's fire calls at least this far apart (fireIntervalMs): each fire is a transaction
 * whose fixed cost dwarfs a row's; at 1,000 due/s, 10 ms took PostgreSQL's CPU per message
 * from ~1.05 ms to ~0.65 ms (bench/results/postgres-fire-interval/).
 */
const FIRE_INTERVAL_MS = 10;
/**
 * Owners fire this far ahead of the due time (fireAheadMs), a take handing out only what is
 * due: the wait for the next fire call and the fire itself leave the path of a delivery.
 */
const FIRE_AHEAD_MS = 50;

/** The options of a queue on PostgreSQL: where it is, its connections, and the node's. */
export interface PostgresQueueOptions extends PartitionedQueueOptions {
  /** A connection string, or a `pg.Pool` of the application's (left open by close()). */
  postgres: string | PgPool;
  /** Connections of the pool made from a connection string. Default 10. */
  poolSize?: number;
  /** The most a statement may run before PostgreSQL cancels it. Default 10,000 ms. */
  statementTimeoutMs?: number;
  /** How long open() keeps trying to reach PostgreSQL. Default 10 s. */
  connectTimeoutMs?: number;
  /**
   * The least time from one of the node's fire calls to the next: what falls due in between
   * goes in one transaction, fewer and fuller ones for up to that much lateness. Default 10 ms.
   */
  fireIntervalMs?: number;
  /**
   * How far ahead of their due time messages are fired (made ready): a take hands out only
   * those due by the taker's clock, so that the fire is done by then. Default 50 ms.
   */
  fireAheadMs?: number;
}

export async function openPostgresBackend(
  options: PostgresQueueOptions,
  limits: QueueLimits,
  report: QueueReport,
): Promise<PartitionedBackend> {
  const fireIntervalMs = options.fireIntervalMs ?? FIRE_INTERVAL_MS;
  checkOption(fireIntervalMs, 'fireIntervalMs', 0, 1_000);
  const fireAheadMs = options.fireAheadMs ?? FIRE_AHEAD_MS;
  checkOption(fireAheadMs, 'fireAheadMs', 0, 1_000);
  const settings = checkNodeOptions(options, limits, fireIntervalMs, fireAheadMs);
  // The driver's own, checked here too so that a bad one is refused before any connection.
  checkPoolOptions(options);
  const timeoutMs = options.connectTimeoutMs ?? 10_000;
  const connectTimeoutMs = checkOption(timeoutMs, 'connectTimeoutMs', 1, 600_000);
  const { postgres } = options;
  if (typeof postgres === 'string') checkConnectionString(postgres);
  const where = typeof postgres === 'string' ? hidePassword(postgres) : 'the pg.Pool given';
  return untilReachable(where, connectTimeoutMs, async (leftMs) => {
    // A pool of the application's connects as the application set it up.
    if (typeof postgres === 'string') await probe(await loadPg(), postgres, leftMs);
    return open(options, settings, limits, report);
  });
}

async function open(
  options: PostgresQueueOptions,
  settings: NodeSettings,
  limits: QueueLimits,
  report: QueueReport,
): Promise<PartitionedBackend> {
  const driver = await PostgresDriver.open({
    postgres: options.postgres,
    queue: settings.queue,
    ...(options.poolSize === undefined ? {} : { poolSize: options.poolSize }),
    ...(options.statementTimeoutMs === undefined
      ? {}
      : { statementTimeoutMs: options.statementTimeoutMs }),
    onError: (err) => settings.onError(err),
  });
  let backend: PartitionedBackend | undefined;
  try {
    const stored = await driver.config(settings.partitions, settings.windowMs);
    backend = new PartitionedBackend(driver, { ...settings, ...stored }, report, limits.onFault);
    await backend.start();
    return backend;
  } catch (err) {
    backend?.abandon();
    await driver.close().catch(() => undefined);
    throw err;
  }
}
