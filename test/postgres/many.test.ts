/**
 * PostgresDriver's calls for several partitions at once (fireMany, ackMany): one statement, each
 * partition's part as its own call would make it, fenced on its own.
 */

import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { postgresInstalled } from '../../scripts/postgres.mjs';
import { at, message, own, windowOf, withPostgres } from './with-postgres.js';

describe.runIf(postgresInstalled())('PostgresDriver: several partitions in one call', () => {
  const pg = withPostgres();

  it("fires each partition's messages under its own fence, and acks them in one call", async () => {
    const driver = await pg.open();
    const due = Date.now() - 1_000;
    const w = windowOf(due);
    const owners = [await own(driver, 0), await own(driver, 1), await own(driver, 2)];
    const placed = [];
    for (const p of [0, 1, 2]) {
      await driver.schedule(p, [message({ id: `m-${p}`, deliverAt: due })]);
      await driver.load(p, owners[p], (w + 1) * 30_000, false);
      const read = await driver.read(p, `w${w}`, 0, 10);
      placed.push(read.live.map((row) => ({ ...at(p, row.id), seg: `w${w}`, index: row.index })));
    }
    // Partition 2 is fenced: its caller names an epoch it does not hold.
    const stale = { ...owners[2], epoch: owners[2].epoch + 1 };
    const answers = await driver.fireMany(
      [
        { partition: 0, by: owners[0], at: placed[0] },
        { partition: 1, by: owners[1], at: placed[1] },
        { partition: 2, by: stale, at: placed[2] },
      ],
      0,
    );
    expect(answers.map((a) => a?.fired)).toEqual([1, 1, undefined]);
    expect(await driver.readyPartitions('invoice', 3)).toEqual([0, 1]);
    const taken = [0, 1].map(async (p) => driver.take(p, 'invoice', 10, 30_000, 1 << 20));
    const [t0, t1] = await Promise.all(taken);
    expect([t0.length, t1.length]).toEqual([1, 1]);
    const acked = await driver.ackMany([
      { partition: 0, deliveries: [{ ...at(0, 'm-0'), attempt: 1 }] },
      {
        partition: 1,
        deliveries: [
          { ...at(1, 'm-1'), attempt: 2 },
          { ...at(1, 'm-1'), attempt: 1 },
        ],
      },
    ]);
    expect(acked).toEqual([[true], [false, true]]);
    expect((await driver.get(at(1, 'm-1')))?.status).toBe('acked');
    expect((await driver.get(at(2, 'm-2')))?.status).toBe('scheduled');
  });
});
