/**
 * PostgresDriver against a tiny obviously-correct model of one partition (a map of id to
 * state) on random sequences of schedules, cancels, fires, takes, acks, nacks and requeues:
 * after every call, every id's state and the partition's counts are the model's.
 */

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { PostgresDriver } from '../../src/postgres/driver.js';
import type { Owner } from '../../src/partitioned/driver.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { postgresInstalled } from '../../scripts/postgres.mjs';
import { at, message, own, windowOf, withPostgres } from './with-postgres.js';

const IDS = ['a', 'b', 'c'];
const FAR = 1_900_000_000_000;
const LETTER = { scheduled: 'S', ready: 'R', inflight: 'I', dead: 'D' } as const;

type Status = 'scheduled' | 'ready' | 'inflight' | 'dead' | 'acked' | 'cancelled';
type State = { status: Status; due: number; attempts: number; maxAttempts: number };

type Command =
  | { op: 'schedule'; id: string; past: boolean; maxAttempts: number }
  | { op: 'cancel' | 'ack' | 'nack' | 'requeue'; id: string }
  | { op: 'fire' }
  | { op: 'take'; most: number };

const id = fc.constantFrom(...IDS);
// Weighted so that messages often get as far as a delivery, a nack and a death.
const command: fc.Arbitrary<Command> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('schedule' as const),
      id,
      past: fc.boolean(),
      maxAttempts: fc.integer({ min: 1, max: 3 }),
    }),
  },
  { weight: 3, arbitrary: fc.constant({ op: 'fire' as const }) },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('take' as const),
      most: fc.integer({ min: 1, max: 4 }),
    }),
  },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('nack' as const), id }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constantFrom('cancel', 'ack', 'requeue'), id }) },
);

const live = (s: State | undefined): s is State =>
  s !== undefined && s.status !== 'acked' && s.status !== 'cancelled';

/** Fires every scheduled message due by now, as an owner does after reading its segments. */
async function fireDue(driver: PostgresDriver, by: Owner): Promise<void> {
  const now = Date.now();
  await driver.load(0, by, now + 1, false);
  const segs = [
    ...(await driver.windows(0, -Infinity, windowOf(now) + 1)).map((w) => `w${w}`),
    ...(await driver.nearSegments(0)),
  ];
  for (const seg of segs) {
    const { live: rows } = await driver.read(0, seg, 0, 10_000);
    const due = rows.filter((row) => row.status === 'S' && row.deliverAt <= now);
    await driver.fire(
      0,
      by,
      0,
      due.map((row) => ({ ...at(0, row.id), seg, index: row.index })),
    );
  }
}

async function step(driver: PostgresDriver, by: Owner, model: Map<string, State>, c: Command) {
  const now = Date.now();
  if (c.op === 'schedule') {
    const due = c.past ? now - 1_000 : FAR;
    const m = message({ id: c.id, deliverAt: due, maxAttempts: c.maxAttempts });
    const { existing } = await driver.schedule(0, [m]);
    const before = model.get(c.id);
    if (live(before)) {
      expect(existing).toEqual([before.due]);
    } else {
      expect(existing).toEqual([undefined]);
      model.set(c.id, { status: 'scheduled', due, attempts: 0, maxAttempts: c.maxAttempts });
    }
  } else if (c.op === 'cancel') {
    const before = model.get(c.id);
    const answer = await driver.cancel(at(0, c.id));
    if (live(before)) {
      expect(answer).toEqual({
        topic: 'invoice',
        deliverAt: before.due,
        attempts: before.attempts,
      });
      before.status = 'cancelled';
    } else {
      expect(answer).toBeUndefined();
    }
  } else if (c.op === 'fire') {
    await fireDue(driver, by);
    for (const s of model.values())
      if (s.status === 'scheduled' && s.due <= now) s.status = 'ready';
  } else if (c.op === 'take') {
    const taken = await driver.take(0, 'invoice', c.most, 600_000, 1 << 20);
    const ready = [...model.values()].filter((s) => s.status === 'ready').length;
    expect(taken).toHaveLength(Math.min(c.most, ready));
    for (const t of taken) {
      const s = model.get(t.id)!;
      expect(s.status).toBe('ready');
      s.status = 'inflight';
      s.attempts++;
      expect(t.attempts).toBe(s.attempts);
    }
  } else if (c.op === 'ack') {
    const s = model.get(c.id);
    const attempt = s?.attempts ?? 1;
    const [done] = await driver.ack(0, [{ ...at(0, c.id), attempt }], false);
    expect(done).toBe(s?.status === 'inflight');
    if (s?.status === 'inflight') s.status = 'acked';
  } else if (c.op === 'nack') {
    const s = model.get(c.id);
    const retry = {
      ...at(0, c.id),
      attempt: s?.attempts ?? 1,
      due: now - 500,
      window: windowOf(now),
    };
    const answer = await driver.nack(0, retry, 'no', false);
    if (s?.status !== 'inflight') {
      expect(answer).toBeUndefined();
    } else if (s.attempts >= s.maxAttempts) {
      expect(answer).toBe('dead');
      s.status = 'dead';
    } else {
      expect(answer).toBe('retry');
      Object.assign(s, { status: 'scheduled', due: retry.due });
    }
  } else {
    const s = model.get(c.id);
    const moved = await driver.move('requeue', at(0, c.id), FAR, windowOf(FAR));
    expect(moved).toBe(s?.status === 'dead');
    if (s?.status === 'dead') Object.assign(s, { status: 'scheduled', due: FAR, attempts: 0 });
  }
}

async function check(driver: PostgresDriver, model: Map<string, State>) {
  const counts: Record<string, number> = {};
  for (const id of IDS) {
    const s = model.get(id);
    const info = await driver.get(at(0, id));
    if (s === undefined) {
      expect(info).toBeUndefined();
      continue;
    }
    expect(info).toEqual({
      id,
      topic: 'invoice',
      status: s.status,
      deliverAt: s.due,
      attempts: s.attempts,
    });
    if (live(s)) {
      const key = `invoice|${LETTER[s.status as keyof typeof LETTER]}`;
      counts[key] = (counts[key] ?? 0) + 1;
    }
  }
  expect(await driver.counts(0)).toEqual(counts);
}

describe.runIf(postgresInstalled())('PostgresDriver: against a model', () => {
  const pg = withPostgres();

  it('agrees with the model on random sequences of calls', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(command, { minLength: 10, maxLength: 50 }), async (commands) => {
        const driver = await pg.open();
        const by = await own(driver, 0);
        const model = new Map<string, State>();
        for (const c of commands) {
          await step(driver, by, model, c);
          await check(driver, model);
        }
        await driver.close();
      }),
      { numRuns: 25 },
    );
  }, 240_000);
});
