/**
 * Several nodes over one PostgreSQL: opening a queue at once, concurrent takes that never hand
 * a message out twice, concurrent schedules of one id, the LISTEN connection coming back after
 * the server dropped it, and the driver's named errors and durability.
 */

import { describe, expect, it } from 'vitest';
import { PostgresDriver } from '../../src/postgres/driver.js';
import { pgFrom } from '../../src/postgres/pg.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { postgresInstalled } from '../../scripts/postgres.mjs';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { freePort } from '../../scripts/valkey.mjs';
import { waitFor } from '../support/wait-for.js';
import { at, message, own, windowOf, withPostgres } from './with-postgres.js';

describe.runIf(postgresInstalled())('PostgresDriver: nodes', () => {
  const pg = withPostgres();

  it('lets nodes open one queue at once, the schema made once', async () => {
    const drivers = await Promise.all(
      Array.from({ length: 4 }, () => PostgresDriver.open({ postgres: pg.url, queue: 'shared' })),
    );
    const answers = await Promise.all(drivers.map((d) => d.config(4, 30_000)));
    await Promise.all(drivers.map((d) => d.close()));
    expect(new Set(answers.map((a) => JSON.stringify(a))).size).toBe(1);
    const { rows } = await pg.pool.query(
      `SELECT value FROM "tickwheel_shared".config WHERE key = 'version'`,
    );
    expect(rows).toHaveLength(1);
  });

  it('hands each ready message to one consumer, however many take at once', async () => {
    const owner = await pg.open('busy');
    const consumers = await Promise.all([1, 2, 3].map(() => pg.open('busy')));
    const by = await own(owner, 0);
    const due = Date.now() - 1_000;
    const ids = Array.from({ length: 300 }, (_, i) => `t-${i}`);
    await owner.schedule(
      0,
      ids.map((id) => message({ id, deliverAt: due })),
    );
    await owner.load(0, by, due + 1, false);
    const seg = `w${windowOf(due)}`;
    await owner.fire(
      0,
      by,
      0,
      ids.map((id, index) => ({ ...at(0, id), seg, index })),
    );
    const taken: string[] = [];
    await Promise.all(
      [owner, ...consumers].map(async (driver) => {
        for (;;) {
          const batch = await driver.take(0, 'invoice', 7, 60_000, 1 << 20);
          if (batch.length === 0) return;
          taken.push(...batch.map((t) => t.id));
        }
      }),
    );
    expect(taken).toHaveLength(300);
    expect(new Set(taken).size).toBe(300);
    expect(await owner.counts(0)).toEqual({ 'invoice|I': 300 });
  });

  it('runs schedules, fires, takes, acks, nacks and cancels of one partition at once without a deadlock', async () => {
    const owner = await pg.open('contended');
    const nodes = await Promise.all([1, 2, 3].map(() => pg.open('contended')));
    const by = await own(owner, 1);
    await owner.load(1, by, Date.now() + 60_000, false);
    const errors: unknown[] = [];
    const guard = (work: Promise<unknown>) => work.catch((err: unknown) => errors.push(err));
    let done = 0;
    const producer = async (driver: PostgresDriver, n: number) => {
      for (let i = 0; i < 40; i++) {
        const now = Date.now();
        await guard(
          driver.schedule(1, [
            message({ id: `p${n}-${i}`, deliverAt: now - 10 }),
            message({ id: `f${n}-${i}`, deliverAt: now + 3_600_000 }),
          ]),
        );
        if (i % 3 === 0) await guard(driver.cancel(at(1, `f${n}-${i}`)));
      }
    };
    const firer = async () => {
      while (done < 3) {
        for (const seg of await owner.nearSegments(1)) {
          const { live } = await owner.read(1, seg, 0, 1_000);
          const due = live.filter((row) => row.status === 'S' && row.deliverAt <= Date.now());
          await guard(
            owner.fire(
              1,
              by,
              0,
              due.map((row) => ({ ...at(1, row.id), seg, index: row.index })),
            ),
          );
        }
      }
    };
    const consumer = async (driver: PostgresDriver) => {
      while (done < 3 || (await driver.readyPartitions('invoice', 2)).includes(1)) {
        const batch = await driver.take(1, 'invoice', 5, 60_000, 1 << 20);
        const deliveries = batch.map((t) => ({ ...at(1, t.id), attempt: t.attempts }));
        const acks = deliveries.filter((_, i) => i % 4 !== 0);
        await guard(driver.ack(1, [...acks].reverse(), false));
        for (const d of deliveries.filter((_, i) => i % 4 === 0)) {
          const retry = { ...d, due: Date.now() - 5, window: windowOf(Date.now()) };
          await guard(driver.nack(1, retry, 'again', false));
        }
      }
    };
    await Promise.all([
      ...nodes.map((driver, n) => producer(driver, n).finally(() => done++)),
      firer(),
      ...nodes.map((driver) => consumer(driver)),
    ]);
    expect(errors).toEqual([]);
    const counts = await owner.counts(1);
    expect(counts['invoice|S']).toBeGreaterThan(0);
  }, 120_000);

  it('creates one message when nodes schedule the same id at once', async () => {
    const drivers = await Promise.all([1, 2, 3, 4].map(() => pg.open('dedup')));
    const due = Date.now() + 3_600_000;
    const answers = await Promise.all(
      drivers.map((d, i) => d.schedule(2, [message({ id: 'once', deliverAt: due + i })])),
    );
    const created = answers.filter((a) => a.existing[0] === undefined);
    expect(created).toHaveLength(1);
    expect(await drivers[0].counts(2)).toEqual({ 'invoice|S': 1 });
  });

  it('listens again after PostgreSQL dropped the LISTEN connection, and says n and i to each partition', async () => {
    const errors: Error[] = [];
    const driver = await PostgresDriver.open({
      postgres: pg.url,
      queue: 'listening',
      onError: (err) => errors.push(err),
    });
    try {
      await driver.config(4, 30_000);
      const events: string[] = [];
      const stop = await driver.subscribe(1, (event) => events.push(event));
      await driver.lease(1, 'acquire', { node: 'a', epoch: 0 }, 60_000);
      const by = { node: 'a', epoch: 1 };
      await driver.load(1, by, Date.now() + 60_000, false);
      await driver.schedule(1, [message({ id: 'before', deliverAt: Date.now() })]);
      await waitFor(() => events.some((e) => e.includes('before')));
      await pg.pool.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN%'`,
      );
      await waitFor(() => errors.length > 0);
      // What it may have missed, the owner is told to look for.
      await waitFor(() => events.includes('n') && events.includes('i'));
      // Notifications sent while it reconnects are lost: schedule until one is heard.
      let n = 0;
      await waitFor(
        async () => {
          await driver.schedule(1, [message({ id: `after-${++n}`, deliverAt: Date.now() })]);
          return events.some((e) => e.includes('after-'));
        },
        { intervalMs: 50 },
      );
      await stop();
    } finally {
      await driver.close();
    }
  });

  it("runs on a pool of the application's, which close() leaves open", async () => {
    const driver = await PostgresDriver.open({ postgres: pg.pool, queue: 'on-a-pool' });
    await driver.config(4, 30_000);
    const events: string[] = [];
    await driver.subscribe(0, (event) => events.push(event));
    const by = await own(driver, 0);
    await driver.load(0, by, Date.now() + 60_000, false);
    await driver.schedule(0, [message({ id: 'pooled', deliverAt: Date.now() })]);
    await waitFor(() => events.some((e) => e.includes('pooled')));
    await driver.close();
    expect((await pg.pool.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
  });

  it('says what synchronous_commit makes of a commit, and that the server answers', async () => {
    const driver = await pg.open();
    expect(driver.durability).toMatchObject({ setting: 'on', option: 'synchronous_commit' });
    expect(await driver.problem()).toBeUndefined();
    await expect(driver.durable(0, 'a schedule')).resolves.toBeUndefined();
  });

  it('refuses bad options and an absent server with named errors', async () => {
    await expect(
      PostgresDriver.open({ postgres: pg.url, queue: 'no spaces' }),
    ).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_OPTION',
    });
    await expect(
      PostgresDriver.open({ postgres: pg.url, queue: 'q', poolSize: 0 }),
    ).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_INVALID_OPTION' });
    await expect(
      PostgresDriver.open({ postgres: 42 as unknown as string, queue: 'q' }),
    ).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_INVALID_OPTION' });
    const port = (await freePort()) as number;
    await expect(
      PostgresDriver.open({ postgres: `postgres://x@127.0.0.1:${port}/postgres`, queue: 'q' }),
    ).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_UNAVAILABLE' });
  });

  it('names the missing pg package with the command that installs it', async () => {
    await expect(pgFrom(import('pg-not-installed' as string))).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_MISSING_DEPENDENCY',
      install: 'npm install pg@8',
      missing: ['pg'],
    });
    expect(typeof (await pgFrom(import('pg'))).Pool).toBe('function');
  });

  it('keeps two queues apart, even with names too long for a schema of their own', async () => {
    const long = 'a'.repeat(60);
    const one = await pg.open(`${long}-1`);
    const two = await pg.open(`${long}-2`);
    expect(one.schema).not.toBe(two.schema);
    await one.schedule(0, [message({ id: 'x', deliverAt: Date.now() + 60_000 })]);
    expect(await two.get(at(0, 'x'))).toBeUndefined();
  });
});
