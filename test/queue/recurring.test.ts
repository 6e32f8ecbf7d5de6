/**
 * Recurring schedules (src/queue/recurring.ts): when occurrences fall across daylight-saving
 * changes in two time zones, and a model test that runs schedules for up to a year of virtual
 * time on the file store with restarts at random points (some right after an occurrence's
 * message was written and before the schedule's record was: the crash window) and random
 * downtimes. The delivered occurrences must be exactly the reference's: every occurrence, minus
 * the missed ones the catch-up policy skips; none twice, none early.
 */

import { appendFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Cron } from 'croner';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/index.js';
import { DelayQueue, MemoryStore } from '../../src/delay-queue.js';
import { FileStore } from '../../src/store/file/file-store.js';
import { checkSpec, occurrencesOf, type RecurringSpec } from '../../src/queue/recurring-spec.js';
import type { Store } from '../../src/queue/store.js';
import { advance, fileKind, memoryKind, settle, useQueues, type QueueKind } from './harness.js';

const openQueue = useQueues();

/** Local calendar date of an instant in a time zone, as YYYY-MM-DD. */
function localDate(at: number, timeZone: string): string {
  return new Intl.DateTimeFormat('en-CA', { timeZone }).format(new Date(at));
}

function occurrencesBetween(spec: RecurringSpec, createdAt: number, from: number, to: number) {
  const occurrences = occurrencesOf(checkSpec(spec, createdAt), createdAt);
  const all: number[] = [];
  for (let at = occurrences.next(from); at !== null && at <= to; at = occurrences.next(at)) {
    all.push(at);
  }
  return all;
}

describe('occurrences across daylight-saving changes', () => {
  const year = [Date.UTC(2026, 0, 1), Date.UTC(2027, 0, 1)] as const;

  it.each([
    ['America/New_York', '30 2 * * *'],
    ['America/New_York', '30 1 * * *'],
    ['Europe/Berlin', '30 2 * * *'],
    ['Europe/Berlin', '0 3 * * *'],
  ])(
    '%s %s runs once on every local day of a year, spring-forward and fall-back included',
    (timezone, cron) => {
      const spec = { topic: 't', cron, timezone };
      const all = occurrencesBetween(spec, year[0], year[0], year[1]);
      const perDay = new Map<string, number>();
      for (const at of all) {
        const day = localDate(at, timezone);
        perDay.set(day, (perDay.get(day) ?? 0) + 1);
      }
      expect([...perDay.values()].every((n) => n === 1)).toBe(true);
      expect(perDay.size).toBeGreaterThanOrEqual(364);
      // Strictly increasing, whole seconds.
      for (let i = 1; i < all.length; i++) expect(all[i]).toBeGreaterThan(all[i - 1]);
      expect(all.every((at) => at % 1000 === 0)).toBe(true);
    },
  );

  it.each([
    // 2026-03-08: 02:00 EST -> 03:00 EDT. 02:30 does not exist: it runs at 03:00 EDT (07:00Z).
    ['America/New_York', '30 2 * * *', Date.UTC(2026, 2, 8), Date.UTC(2026, 2, 8, 7, 0)],
    // 2026-11-01: 02:00 EDT -> 01:00 EST. 01:30 happens twice: it runs at the first (05:30Z).
    ['America/New_York', '30 1 * * *', Date.UTC(2026, 10, 1), Date.UTC(2026, 10, 1, 5, 30)],
    // Berlin, 2026-10-25: 03:00 CEST -> 02:00 CET; 02:30 runs once (00:30Z, the first).
    ['Europe/Berlin', '30 2 * * *', Date.UTC(2026, 9, 25), Date.UTC(2026, 9, 25, 0, 30)],
  ])(
    '%s %s on a DST day runs once: a skipped time at the end of the gap, a repeated one at its first pass',
    (timezone, cron, day, expected) => {
      const spec = { topic: 't', cron, timezone };
      expect(occurrencesBetween(spec, 0, day, day + 86_400_000)).toEqual([expected]);
    },
  );

  it('interval schedules are anchored: at startAt + k * everyMs, or one interval after creation', () => {
    expect(occurrencesBetween({ topic: 't', everyMs: 60_000 }, 1_000, 0, 200_000)).toEqual([
      61_000, 121_000, 181_000,
    ]);
    expect(
      occurrencesBetween(
        { topic: 't', everyMs: 60_000, startAt: 5_000, endAt: 130_000 },
        0,
        0,
        1e9,
      ),
    ).toEqual([5_000, 65_000, 125_000]);
  });
});

describe('occurrences of schedules that share a cron expression and zone', () => {
  // Around the 2026 fall-back in New York and spring-forward in Berlin: two days either side.
  const windows = [Date.UTC(2026, 10, 1, 6), Date.UTC(2026, 2, 29, 1)];
  const span = 2 * 86_400_000;

  it('are what croner answers each question alone, whatever order they are asked in', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(
          '* * * * *',
          '*/30 * * * *',
          '30 1 * * *',
          '0,30 1-3 * * *',
          '59 * * * * *',
        ),
        fc.constantFrom('America/New_York', 'Europe/Berlin', 'UTC'),
        fc.constantFrom(...windows),
        fc.array(
          fc.record({
            schedule: fc.integer({ min: 0, max: 2 }),
            // Far apart, or a few minutes either side of the change.
            offset: fc.oneof(
              fc.integer({ min: -span, max: span }),
              fc.integer({ min: -300_000, max: 300_000 }),
            ),
            // Also asked: just before and at the answer (the next step and a later info()).
            follow: fc.boolean(),
          }),
          { minLength: 1, maxLength: 40 },
        ),
        (cron, timezone, around, questions) => {
          const spec = checkSpec({ topic: 't', cron, timezone });
          const schedules = [0, 1, 2].map(() => occurrencesOf(spec, 0));
          const alone = new Cron(cron, { timezone, paused: true });
          const expected = (after: number) => alone.nextRun(new Date(after))?.getTime() ?? null;
          for (const { schedule, offset, follow } of questions) {
            const asked = [around + offset];
            const first = schedules[schedule].next(asked[0]);
            if (follow && first !== null) asked.push(first - 1, first - 0.5, first);
            for (const after of asked) {
              expect(schedules[schedule].next(after), `${cron} ${timezone} after ${after}`).toBe(
                expected(after),
              );
            }
          }
        },
      ),
      { numRuns: 60 },
    );
  });
});

// ---- the model test --------------------------------------------------------------------------

interface Plan {
  spec: RecurringSpec;
  /** Virtual time the run covers. */
  spanMs: number;
  /** Restarts: at this offset from the start, down for this long, crashing at the nth record write. */
  restarts: Array<{ at: number; downMs: number; crashAtWrite: number | null }>;
}

const SPECS: Array<{
  spec: Omit<RecurringSpec, 'topic' | 'catchUp'>;
  spanMs: number;
  start: number;
}> = [
  // Daily 02:30 in New York over a year: both DST days.
  {
    spec: { cron: '30 2 * * *', timezone: 'America/New_York' },
    spanMs: 365 * 86_400_000,
    start: Date.UTC(2026, 0, 3),
  },
  // Every 6 hours in Berlin over 3 months around the spring change.
  {
    spec: { cron: '0 */6 * * *', timezone: 'Europe/Berlin' },
    spanMs: 90 * 86_400_000,
    start: Date.UTC(2026, 1, 1),
  },
  // Every 30 minutes in New York over the fall-back day: the repeated hour's half hours run twice.
  {
    spec: { cron: '*/30 * * * *', timezone: 'America/New_York' },
    spanMs: 3 * 86_400_000,
    start: Date.UTC(2026, 9, 31),
  },
  // An interval of 5 hours.
  { spec: { everyMs: 5 * 3_600_000 }, spanMs: 60 * 86_400_000, start: Date.UTC(2026, 5, 1) },
];

/**
 * What must be delivered: every occurrence from the first after creation to the end, minus, per
 * downtime (d, u], the missed ones the policy drops. Missed: after the occurrence created ahead
 * before d (the first one after d), and not after u.
 */
function reference(
  all: number[],
  downtimes: Array<[number, number]>,
  catchUp: string,
): Set<number> {
  const expected = new Set(all);
  for (const [d, u] of downtimes) {
    const ahead = all.find((at) => at > d);
    if (ahead === undefined) continue;
    const missed = all.filter((at) => at > ahead && at <= u);
    const kept =
      catchUp === 'all' ? missed.slice(-1000) : catchUp === 'latest' ? missed.slice(-1) : [];
    for (const at of missed) if (!kept.includes(at)) expected.delete(at);
  }
  return expected;
}

/**
 * A file store whose nth schedule-record write fails, as if the process died just before it:
 * from then on nothing it does is durable (every write fails), as nothing a dead process does is.
 */
function crashingStore(
  store: FileStore,
  failAt: number | null,
  now: () => number,
): { store: Store; crashed: () => boolean; crashedAt: () => number; arm: () => void } {
  let writes = 0;
  let crashed = false;
  let crashedAt = 0;
  // Only writes made after open() count: a crash during open is a shorter run, not a new case.
  let armed = false;
  const WRITES = new Set(['add', 'move', 'finish', 'bury', 'writeSchedules', 'writeTopicSettings']);
  const proxy = new Proxy(store, {
    get(target, property) {
      const value = Reflect.get(target, property, target) as unknown;
      if (typeof value !== 'function') return value;
      const method = (value as (...a: unknown[]) => unknown).bind(target);
      if (!WRITES.has(String(property))) return method;
      return (...args: unknown[]) => {
        if (crashed) return Promise.reject(new Error('the process is gone'));
        if (armed && property === 'writeSchedules' && failAt !== null && ++writes === failAt) {
          crashed = true;
          crashedAt = now();
          return Promise.reject(new Error('injected crash before the record was written'));
        }
        return method(...args);
      };
    },
  });
  return {
    store: proxy as unknown as Store,
    crashed: () => crashed,
    crashedAt: () => crashedAt,
    arm: () => void (armed = true),
  };
}

describe('recurring schedules against a reference, with restarts and crashes (file store)', () => {
  const dirs: QueueKind[] = [];
  afterEach(() => {
    for (const kind of dirs.splice(0)) kind.cleanup();
  });

  it('delivers every occurrence once, but for the missed ones its catch-up policy drops', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: SPECS.length - 1 }),
        fc.constantFrom('latest', 'all', 'none'),
        fc.array(
          fc.record({
            at: fc.double({ min: 0.02, max: 0.95, noNaN: true }),
            downMs: fc.oneof(fc.constant(0), fc.integer({ min: 60_000, max: 3 * 86_400_000 })),
            crashAtWrite: fc.option(fc.integer({ min: 1, max: 3 }), { nil: null }),
          }),
          { maxLength: 3 },
        ),
        async (which, catchUp, restartsGiven) => {
          const { spec: given, spanMs, start } = SPECS[which];
          const plan: Plan = {
            spec: { topic: 'jobs', ...given, catchUp: catchUp as RecurringSpec['catchUp'] },
            spanMs,
            restarts: restartsGiven
              .map((r) => ({ ...r, at: Math.floor(r.at * spanMs) }))
              .sort((a, b) => a.at - b.at),
          };
          await runPlan(plan, start, dirs);
        },
      ),
      { numRuns: Number(process.env.RECURRING_RUNS ?? 24) },
    );
  }, 240_000);
});

async function runPlan(plan: Plan, start: number, dirs: QueueKind[]): Promise<void> {
  const kind = fileKind();
  dirs.push(kind);
  const clock = new ManualClock(start);
  const end = start + plan.spanMs;
  const delivered = new Map<string, number>();
  const early: string[] = [];
  const downtimes: Array<[number, number]> = [];
  let writeFailAt: number | null = null;

  const open = async () => {
    // A day's horizon: the loader wakes every 6 h of virtual time, not every 250 ms of a year.
    const fileStore = await FileStore.open({
      dir: dirOf(kind),
      fsync: 'never',
      windowMs: 3_600_000,
    });
    const crashing = crashingStore(fileStore, writeFailAt, () => clock.now());
    const queue = await DelayQueue.open({ store: crashing.store, clock, horizonMs: 86_400_000 });
    crashing.arm();
    return { queue, crashed: crashing.crashed, crashedAt: crashing.crashedAt };
  };
  const drain = async (queue: DelayQueue) => {
    for (;;) {
      await queue.settled();
      clock.advance(0);
      await settle();
      const got = await queue.receive('jobs', { max: 1000 });
      // A crashed process's deliveries never happened (its acks are not durable either).
      if (got.length === 0 || crashed()) return;
      for (const message of got) {
        const at = Number(message.id.split('@')[1]);
        if (clock.now() < at) early.push(message.id);
        delivered.set(message.id, (delivered.get(message.id) ?? 0) + 1);
        await queue.ack(message.receipt);
      }
    }
  };

  let { queue, crashed, crashedAt } = await open();
  let created = false;
  try {
    await queue.putSchedule('s', plan.spec);
    created = true;
  } catch {
    // A crash injected at the first write: see below.
  }
  if (!created) throw new Error('the first write cannot crash: crashAtWrite starts with a restart');
  const createdAt = start;
  const all = occurrencesBetween(plan.spec, createdAt, createdAt, end);
  const stops = [...plan.restarts];
  while (clock.now() < end) {
    const restart = stops[0];
    const nextOccurrence = all.find((at) => at > clock.now());
    const target = Math.min(
      end,
      restart?.at !== undefined ? start + restart.at : Infinity,
      nextOccurrence ?? Infinity,
    );
    if (target > clock.now()) await clock.advanceToAsync(target);
    await advance(clock, 600, 300, queue);
    await drain(queue);
    const down = restart !== undefined && clock.now() >= start + restart.at;
    if (down || crashed()) {
      await queue.close().catch(() => {});
      // A crashed process was down from its crash on, whatever the test did with it since.
      const d = crashed() ? crashedAt() : clock.now();
      writeFailAt = null;
      if (down) {
        stops.shift();
        clock.advance(restart.downMs);
        writeFailAt = restart.crashAtWrite;
      }
      downtimes.push([d, clock.now()]);
      ({ queue, crashed, crashedAt } = await open());
      await drain(queue);
    }
  }
  await advance(clock, 2_000, 500, queue);
  await drain(queue);
  await queue.close();

  // A downtime may end past the span: every occurrence due by now counts.
  const due = occurrencesBetween(plan.spec, createdAt, createdAt, clock.now() - 1_000);
  const expected = reference(due, downtimes, plan.spec.catchUp as string);
  const got = new Set([...delivered.keys()].map((id) => Number(id.split('@')[1])));
  const twice = [...delivered].filter(([, n]) => n > 1).map(([id]) => id);
  expect({ twice, early }).toEqual({ twice: [], early: [] });
  const missing = [...expected]
    .filter((at) => !got.has(at))
    .map((at) => new Date(at).toISOString());
  // `due` stops a second before now: one due within that last second, after the last downtime
  // (a downtime ending 2 s before the last step's end can put one right at it), may have come.
  const lastUp = downtimes.at(-1)?.[1] ?? -Infinity;
  const optional = (at: number) => at > clock.now() - 1_000 && at <= clock.now() && at > lastUp;
  const extra = [...got]
    .filter((at) => !expected.has(at) && !optional(at))
    .map((at) => new Date(at).toISOString());
  expect({ missing, extra }).toEqual({ missing: [], extra: [] });
}

function dirOf(kind: QueueKind): string {
  return kind.dir as string;
}

// ---- the API --------------------------------------------------------------------------------

describe('the schedule API', () => {
  it('creates, lists, updates, pauses and deletes; a deleted schedule cancels its ahead message', async () => {
    const { clock, queue } = await openQueue(memoryKind);
    const t0 = clock.now();
    const made = await queue.putSchedule('report', {
      topic: 'reports',
      everyMs: 60_000,
      payload: { kind: 'daily' },
    });
    expect(made).toMatchObject({
      name: 'report',
      everyMs: 60_000,
      nextAt: clock.now() + 60_000,
      created: 1,
    });
    expect((await queue.get(`report@${clock.now() + 60_000}`))?.status).toBe('scheduled');
    // Due at t0 + 60 s: delivered from then on, never before.
    await advance(clock, 59_999, 10_000, queue);
    expect(await queue.receive('reports')).toEqual([]);
    await advance(clock, 2, 1, queue);
    const [first] = await queue.receive('reports');
    expect(first).toMatchObject({ id: `report@${t0 + 60_000}`, payload: { kind: 'daily' } });
    const updated = await queue.updateSchedule('report', { everyMs: 120_000 });
    expect(updated).toMatchObject({ everyMs: 120_000, nextAt: clock.now() + 120_000 });
    const paused = await queue.updateSchedule('report', { paused: true });
    expect(paused).toMatchObject({ paused: true, nextAt: null });
    // Its ahead message is gone while paused.
    expect((await queue.get(`report@${clock.now() + 120_000}`))?.status).toBe('cancelled');
    await queue.updateSchedule('report', { paused: false });
    expect((await queue.listSchedules()).map((s) => s.name)).toEqual(['report']);
    const ahead = (await queue.getSchedule('report'))!.nextAt!;
    expect(await queue.deleteSchedule('report')).toBe(true);
    expect(await queue.deleteSchedule('report')).toBe(false);
    expect(await queue.getSchedule('report')).toBeUndefined();
    expect((await queue.get(`report@${ahead}`))?.status).toBe('cancelled');
    expect(await queue.updateSchedule('nope', { paused: true })).toBeUndefined();
  });

  it("overlap 'skip' creates no occurrence while the previous one's message is live", async () => {
    const { clock, queue } = await openQueue(memoryKind);
    await queue.putSchedule('sync', { topic: 'sync', everyMs: 10_000, overlap: 'skip' });
    await advance(clock, 10_000, 1_000, queue);
    const [running] = await queue.receive('sync', { visibilityMs: 60_000 });
    expect(running).toBeDefined();
    // Still running at the next two occurrences: both skipped.
    await advance(clock, 20_000, 1_000, queue);
    expect(await queue.receive('sync')).toEqual([]);
    await queue.ack(running.receipt);
    await advance(clock, 10_000, 1_000, queue);
    expect(await queue.receive('sync')).toHaveLength(1);
    expect(await queue.getSchedule('sync')).toMatchObject({ created: 2, skipped: 2 });
  });

  it('refuses bad schedules with named errors', async () => {
    const { queue } = await openQueue(memoryKind);
    const bad: Array<[string, unknown]> = [
      ['a', { topic: 't' }],
      ['a', { topic: 't', cron: '* * * * *', everyMs: 1000 }],
      ['a', { topic: 't', cron: '61 * * * *' }],
      ['a', { topic: 't', cron: '* * * * *', timezone: 'Mars/Base' }],
      ['a', { topic: 't', everyMs: 10 }],
      ['a', { topic: 't', everyMs: 1000, timezone: 'UTC' }],
      ['a', { topic: 't', everyMs: 1000, catchUp: 'some' }],
      ['a', { topic: 't', everyMs: 1000, overlap: 'maybe' }],
      ['a', { topic: 't', everyMs: 1000, startAt: 10, endAt: 5 }],
      ['a', { topic: 't', everyMs: 1000, evry: 1 }],
      ['a', { topic: 't', everyMs: 1000, payload: 'x'.repeat(70_000) }],
      ['a', { topic: 'bad topic', everyMs: 1000 }],
      ['bad name', { topic: 't', everyMs: 1000 }],
      ['has@at', { topic: 't', everyMs: 1000 }],
      ['a', null],
    ];
    for (const [name, spec] of bad) {
      await expect(
        queue.putSchedule(name, spec as RecurringSpec),
        `${name} ${JSON.stringify(spec)?.slice(0, 80)}`,
      ).rejects.toMatchObject({
        code: expect.stringMatching(/^ERR_TICKWHEEL_INVALID_(OPTION|TOPIC|MESSAGE)$/),
      });
    }
    expect(await queue.listSchedules()).toEqual([]);
  });
});

/** A memory store whose next schedule record write fails once, when asked. */
function flakyScheduleWrites() {
  const store = new MemoryStore();
  let failNext = false;
  const flaky = new Proxy(store, {
    get(target, property) {
      const value = Reflect.get(target, property, target) as unknown;
      if (typeof value !== 'function') return value;
      if (property !== 'writeSchedules') return (value as () => unknown).bind(target);
      return (...args: Parameters<Store['writeSchedules']>) => {
        if (failNext) {
          failNext = false;
          return Promise.reject(new Error('a passing write failure'));
        }
        return target.writeSchedules(...args);
      };
    },
  });
  return { store, flaky, failNextWrite: () => (failNext = true) };
}

describe('the schedule API under failures and races', () => {
  it('two updates at once both land; an update racing a delete finds nothing', async () => {
    const { queue } = await openQueue(memoryKind);
    await queue.putSchedule('s', { topic: 't', everyMs: 60_000 });
    await Promise.all([
      queue.updateSchedule('s', { paused: true }),
      queue.updateSchedule('s', { payload: { v: 2 } }),
    ]);
    expect(await queue.getSchedule('s')).toMatchObject({ paused: true, payload: { v: 2 } });
    const [deleted, updated] = await Promise.all([
      queue.deleteSchedule('s'),
      queue.updateSchedule('s', { paused: false }),
    ]);
    expect([deleted, updated]).toEqual([true, undefined]);
    expect(await queue.getSchedule('s')).toBeUndefined();
  });

  it('a record write that fails once is written again by the retry', async () => {
    const { store, flaky, failNextWrite } = flakyScheduleWrites();
    const clock = new ManualClock(Date.UTC(2026, 5, 1));
    const queue = await DelayQueue.open({ store: flaky, clock, horizonMs: 1000 });
    const warnings: unknown[] = [];
    const onWarning = (w: unknown) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      const t0 = clock.now();
      await queue.putSchedule('s', { topic: 't', everyMs: 60_000 });
      failNextWrite();
      await advance(clock, 60_000, 10_000, queue);
      // The step at t0 + 60 s failed to record the occurrence it made; a second later, it did.
      await advance(clock, 2_000, 500, queue);
      const [stored] = await store.readSchedules();
      expect(stored.lastCreated).toBe(t0 + 120_000);
      expect((await queue.getSchedule('s'))?.lastAt).toBe(t0 + 120_000);
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings.length).toBeGreaterThan(0);
    } finally {
      process.off('warning', onWarning);
      await queue.close();
    }
  });

  it('a new name whose record write failed takes no place under maxSchedules', async () => {
    const { flaky, failNextWrite } = flakyScheduleWrites();
    const clock = new ManualClock(Date.UTC(2026, 5, 1));
    const queue = await DelayQueue.open({ store: flaky, clock, horizonMs: 1000, maxSchedules: 1 });
    try {
      failNextWrite();
      await expect(queue.putSchedule('a', { topic: 't', everyMs: 60_000 })).rejects.toThrow(
        'a passing write failure',
      );
      expect(await queue.putSchedule('b', { topic: 't', everyMs: 60_000 })).toMatchObject({
        name: 'b',
      });
      await expect(queue.putSchedule('c', { topic: 't', everyMs: 60_000 })).rejects.toMatchObject({
        code: 'ERR_TICKWHEEL_CONFLICT',
      });
    } finally {
      await queue.close();
    }
  });

  it('an occurrence made whose record write failed goes with a delete before the retry', async () => {
    const { flaky, failNextWrite } = flakyScheduleWrites();
    const clock = new ManualClock(Date.UTC(2026, 5, 1));
    const queue = await DelayQueue.open({ store: flaky, clock, horizonMs: 1000 });
    const onWarning = () => {};
    process.on('warning', onWarning);
    try {
      const t0 = clock.now();
      await queue.putSchedule('s', { topic: 't', everyMs: 60_000 });
      failNextWrite();
      // The step at t0 + 60 s makes the occurrence at t0 + 120 s; its record write fails.
      await advance(clock, 60_000, 10_000, queue);
      const orphan = `s@${t0 + 120_000}`;
      expect((await queue.get(orphan))?.status).toBe('scheduled');
      expect(await queue.deleteSchedule('s')).toBe(true);
      expect((await queue.get(orphan))?.status).toBe('cancelled');
      await advance(clock, 120_000, 10_000, queue);
      // The occurrence due at t0 + 60 s came before the delete; nothing after it.
      const received = await queue.receive('t', { max: 10 });
      expect(received.map((m) => m.id)).toEqual([`s@${t0 + 60_000}`]);
    } finally {
      process.off('warning', onWarning);
      await queue.close();
    }
  });

  it('a change whose old occurrence was not yet cancelled when the process died is finished on restart', async () => {
    // put writes the new record, then cancels the old version's occurrence made ahead. A crash
    // between the two left that occurrence pending; with the same time as the new version's
    // first, the new one was taken for it (same id) and the old payload was delivered.
    const kind = fileKind();
    try {
      const clock = new ManualClock(Date.UTC(2026, 5, 1, 0, 0, 30));
      const fileStore = await FileStore.open({ dir: dirOf(kind), fsync: 'never' });
      let dead = false;
      let armed = false;
      const dying = new Proxy(fileStore, {
        get(target, property) {
          const value = Reflect.get(target, property, target) as unknown;
          if (typeof value !== 'function') return value;
          const method = (value as (...a: unknown[]) => unknown).bind(target);
          if (!['add', 'move', 'finish', 'bury', 'writeSchedules'].includes(String(property))) {
            return method;
          }
          return async (...args: unknown[]) => {
            if (dead) throw new Error('the process is gone');
            const result = await method(...args);
            // Dies right after the changed record is durable.
            if (armed && property === 'writeSchedules') dead = true;
            return result;
          };
        },
      });
      let queue = await DelayQueue.open({
        store: dying as unknown as Store,
        clock,
        horizonMs: 1000,
      });
      const spec = { topic: 'jobs', cron: '* * * * *', payload: { v: 1 } };
      await queue.putSchedule('s', spec);
      const first = Date.UTC(2026, 5, 1, 0, 1, 0);
      expect((await queue.get(`s@${first}`))?.status).toBe('scheduled');
      armed = true;
      await expect(queue.putSchedule('s', { ...spec, payload: { v: 2 } })).rejects.toThrow(
        'the process is gone',
      );
      await queue.close().catch(() => {});

      queue = await kind.open(clock);
      try {
        expect(await queue.getSchedule('s')).toMatchObject({ payload: { v: 2 } });
        await advance(clock, 30_001, 1_000, queue);
        const got = await queue.receive('jobs', { max: 10 });
        expect(got.map((m) => [m.id, m.payload])).toEqual([[`s@${first}`, { v: 2 }]]);
      } finally {
        await queue.close();
      }
    } finally {
      kind.cleanup();
    }
  });

  it("interval catch-up with endAt stays on the schedule's grid", async () => {
    const { clock, queue: first, kind } = await openQueue(fileKind);
    const t0 = clock.now();
    await first.putSchedule('s', {
      topic: 't',
      everyMs: 60_000,
      startAt: t0 + 60_000,
      endAt: t0 + 190_000,
      catchUp: 'all',
    });
    await first.close();
    clock.advance(600_000);
    const queue = await kind.open(clock);
    try {
      const ids = (await queue.receive('t', { max: 10 })).map(
        (m) => Number(m.id.split('@')[1]) - t0,
      );
      expect(ids).toEqual([60_000, 120_000, 180_000]);
    } finally {
      await queue.close();
    }
  });

  it('a long catch-up that finds nothing in the last week is handled once, not again each step', async () => {
    const { clock, queue: first, kind } = await openQueue(fileKind);
    // Every minute of January only: down from November to March, the scan of January's 44,640
    // minutes jumps to the last week, where there are none.
    await first.putSchedule('january', {
      topic: 't',
      cron: '* * * 1 *',
      timezone: 'UTC',
      overlap: 'skip',
    });
    await first.close();
    clock.advanceTo(Date.UTC(2027, 2, 1));
    let queue = await kind.open(clock);
    const skipped = (await queue.getSchedule('january'))?.skipped;
    expect(skipped).toBeGreaterThanOrEqual(10_000);
    await queue.close();
    queue = await kind.open(clock);
    try {
      // Reopened at the same time: nothing missed since, nothing counted twice.
      expect((await queue.getSchedule('january'))?.skipped).toBe(skipped);
      expect((await queue.getSchedule('january'))?.nextAt).toBe(Date.UTC(2028, 0, 1));
    } finally {
      await queue.close();
    }
  });

  it('takes a cron schedule whose one occurrence is at startAt itself', async () => {
    const { queue } = await openQueue(memoryKind);
    // The next UTC midnight at least a day away, as startAt and endAt both.
    const midnight = (Math.floor(Date.now() / 86_400_000) + 2) * 86_400_000;
    const made = await queue.putSchedule('once', {
      topic: 't',
      cron: '0 0 * * *',
      startAt: midnight,
      endAt: midnight,
    });
    expect(made).toMatchObject({ startAt: midnight, endAt: midnight, nextAt: midnight });
    // One millisecond later there is none: refused.
    await expect(
      queue.putSchedule('never', {
        topic: 't',
        cron: '0 0 * * *',
        startAt: midnight + 1,
        endAt: midnight + 1,
      }),
    ).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_INVALID_OPTION' });
  });

  it('refuses an empty time zone, 7 fields, a cron or interval that never runs, a payload over the limit', async () => {
    const { queue, clock } = await openQueue(memoryKind);
    const now = clock.now();
    for (const spec of [
      { topic: 't', cron: '0 9 * * *', timezone: '' },
      { topic: 't', cron: '0 0 0 1 1 * 2030' },
      { topic: 't', cron: '0 0 30 2 *' },
      { topic: 't', cron: '0 0 * * *', endAt: 1000 },
      // Ended before it starts: the first occurrence is one interval after now.
      { topic: 't', everyMs: 60_000, endAt: 1000 },
      { topic: 't', everyMs: 60_000, endAt: now + 5_000 },
      { topic: 't', everyMs: 60_000, startAt: 0, endAt: 1 },
    ]) {
      await expect(queue.putSchedule('s', spec), JSON.stringify(spec)).rejects.toMatchObject({
        code: 'ERR_TICKWHEEL_INVALID_OPTION',
      });
    }
    const small = await DelayQueue.open({ store: new MemoryStore(), maxPayloadBytes: 100 });
    try {
      await expect(
        small.putSchedule('big', { topic: 't', everyMs: 1000, payload: 'x'.repeat(200) }),
      ).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_PAYLOAD_TOO_LARGE' });
      expect(await small.listSchedules()).toEqual([]);
    } finally {
      await small.close();
    }
    expect(await queue.listSchedules()).toEqual([]);
    // One whose last occurrence is its end is fine.
    await queue.putSchedule('s', { topic: 't', everyMs: 60_000, endAt: now + 60_000 });
    expect((await queue.getSchedule('s'))?.nextAt).toBe(now + 60_000);
  });
});

describe('schedules.log', () => {
  it('is compacted while running: 3,000 changes of two schedules leave a short file', async () => {
    const { clock, queue, kind } = await openQueue(fileKind);
    for (let i = 0; i < 1_500; i++) {
      await queue.putSchedule('a', { topic: 't', everyMs: 60_000, payload: { i } });
      await queue.putSchedule('b', { topic: 't', everyMs: 60_000, payload: { '"deleted":': i } });
    }
    const file = join(dirOf(kind), 'schedules.log');
    const lines = readFileSync(file, 'utf8').split('\n').length - 1;
    expect(lines).toBeLessThanOrEqual(1_001);
    await queue.close();
    const reopened = await kind.open(clock);
    try {
      expect((await reopened.listSchedules()).map((s) => [s.name, s.payload])).toEqual([
        ['a', { i: 1_499 }],
        ['b', { '"deleted":': 1_499 }],
      ]);
    } finally {
      await reopened.close();
    }
  });

  it('read back at a restart, its schedules count against maxSchedules, also past a lowered one', async () => {
    const { clock, queue, kind } = await openQueue(fileKind);
    const spec = { topic: 't', everyMs: 60_000 };
    for (const name of ['a', 'b', 'c']) await queue.putSchedule(name, spec);
    await queue.close();
    const reopened = await kind.open(clock, { maxSchedules: 2 });
    try {
      expect((await reopened.listSchedules()).map((s) => s.name)).toEqual(['a', 'b', 'c']);
      await expect(reopened.putSchedule('d', spec)).rejects.toMatchObject({
        code: 'ERR_TICKWHEEL_CONFLICT',
        message: expect.stringMatching(/^3 recurring schedules exist, .*\(maxSchedules: 2\)/),
      });
      expect(await reopened.updateSchedule('a', { paused: true })).toMatchObject({ paused: true });
      expect(await reopened.deleteSchedule('b')).toBe(true);
      await expect(reopened.putSchedule('d', spec)).rejects.toMatchObject({
        code: 'ERR_TICKWHEEL_CONFLICT',
      });
      expect(await reopened.deleteSchedule('c')).toBe(true);
      expect(await reopened.putSchedule('d', spec)).toMatchObject({ name: 'd' });
    } finally {
      await reopened.close();
    }
  });

  it('survives a restart, cuts a torn last line, and refuses damage elsewhere', async () => {
    const { clock, queue, kind } = await openQueue(fileKind);
    await queue.putSchedule('a', { topic: 't', everyMs: 60_000 });
    await queue.putSchedule('b', { topic: 't', cron: '0 9 * * 1', timezone: 'Europe/Berlin' });
    await queue.deleteSchedule('a');
    await queue.close();
    const file = join(dirOf(kind), 'schedules.log');
    const text = readFileSync(file, 'utf8');
    // A torn append: cut off, the rest read.
    appendFileSync(file, '0123abcd {"name":"c","sp');
    let reopened = await kind.open(clock);
    expect((await reopened.listSchedules()).map((s) => s.name)).toEqual(['b']);
    await reopened.close();
    expect(readFileSync(file, 'utf8')).toBe(text);
    // Zeros after the last whole line (a file lengthened before its data was written): cut.
    appendFileSync(file, Buffer.alloc(64));
    reopened = await kind.open(clock);
    expect((await reopened.listSchedules()).map((s) => s.name)).toEqual(['b']);
    await reopened.close();
    expect(readFileSync(file, 'utf8')).toBe(text);
    // A file zeroed whole, or bytes no append writes: refused, the file left as it is.
    for (const damaged of [Buffer.alloc(text.length), Buffer.from('\u0007garbage, no line')]) {
      writeFileSync(file, damaged);
      await expect(kind.open(clock)).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_CORRUPT' });
      expect(readFileSync(file)).toEqual(damaged);
    }
    writeFileSync(file, text);
    // A damaged line in the middle: refused.
    const lines = text.split('\n');
    lines[1] = lines[1].replace('"t"', '"u"');
    writeFileSync(file, lines.join('\n'));
    await expect(kind.open(clock)).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_CORRUPT' });
    writeFileSync(file, text);
    reopened = await kind.open(clock);
    expect((await reopened.getSchedule('b'))?.timezone).toBe('Europe/Berlin');
    await reopened.close();
  });
});
