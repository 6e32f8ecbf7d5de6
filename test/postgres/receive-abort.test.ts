/**
 * A long poll of the partitioned consumer ends as soon as its signal aborts (consume()'s worker
 * aborts it on close()), rather than at its time limit: closing a consumer on PostgreSQL or
 * Valkey/Redis waited out its receive, and a queue's close() with it.
 */

import { describe, expect, it } from 'vitest';
import { Consumer } from '../../src/partitioned/consumer.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { postgresInstalled } from '../../scripts/postgres.mjs';
import { waitFor } from '../support/wait-for.js';
import { PARTITIONS, WINDOW_MS, withPostgres } from './with-postgres.js';
import { PostgresDriver } from '../../src/postgres/driver.js';

describe.runIf(postgresInstalled())('the partitioned consumer on PostgreSQL', () => {
  const pg = withPostgres();
  const consumerOf = (driver: PostgresDriver) =>
    new Consumer(driver, { partitions: PARTITIONS, windowMs: WINDOW_MS, visibilityMs: 30_000 });

  it('ends a long poll when its signal aborts, answering nothing', async () => {
    const driver = await pg.open();
    const consumer = consumerOf(driver);
    let scans = 0;
    const scan = driver.readyPartitions.bind(driver);
    driver.readyPartitions = async (...args: Parameters<PostgresDriver['readyPartitions']>) => {
      const found = await scan(...args);
      scans++;
      return found;
    };
    const controller = new AbortController();
    // An hour's wait: only the abort can end it within the test's time.
    const receiving = consumer.receive('empty', { max: 10, waitMs: 3_600_000 }, controller.signal);
    // Its first look at the partitions found nothing: it waits.
    await waitFor(() => scans >= 1);
    controller.abort();
    expect(await receiving).toEqual([]);
    consumer.close();
  }, 20_000);

  it('answers at once when its signal was aborted before the wait', async () => {
    const driver = await pg.open();
    const consumer = consumerOf(driver);
    const controller = new AbortController();
    controller.abort();
    expect(await consumer.receive('empty', { waitMs: 3_600_000 }, controller.signal)).toEqual([]);
    consumer.close();
  }, 20_000);
});
