import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/index.js';
import type { DelayQueue } from '../../src/delay-queue.js';
import { T0, advance, fileKind, memoryKind, type QueueKind } from './harness.js';

describe.each([
  ['memory', memoryKind],
  ['file', fileKind],
] as const)('DelayQueue ackMany / nackMany (%s store)', (_name, makeKind) => {
  let kind: QueueKind | undefined;
  let queue: DelayQueue | undefined;
  let clock: ManualClock;

  async function open(): Promise<DelayQueue> {
    kind = makeKind();
    clock = new ManualClock(T0);
    queue = await kind.open(clock);
    return queue;
  }

  afterEach(async () => {
    await queue?.close();
    queue = undefined;
    kind?.cleanup();
    kind = undefined;
  });

  /** Schedules `count` messages due now on `topic` and receives them all. */
  async function deliveries(q: DelayQueue, topic: string, count: number) {
    await q.scheduleMany(
      Array.from({ length: count }, (_, i) => ({
        topic,
        payload: i,
        backoff: { type: 'fixed' as const, delayMs: 100 },
      })),
    );
    await advance(clock, 0, 1, q);
    const received = await q.receive(topic, { max: count });
    expect(received).toHaveLength(count);
    return received;
  }

  it('ackMany acknowledges each receipt: results[i] is for receipts[i]', async () => {
    const q = await open();
    const [a, b, c] = await deliveries(q, 'jobs', 3);
    expect(await q.ackMany([a.receipt, 'not-a-receipt', c.receipt])).toEqual([true, false, true]);
    expect((await q.get(a.id))?.status).toBe('acked');
    expect((await q.get(b.id))?.status).toBe('inflight');
    expect((await q.get(c.id))?.status).toBe('acked');
    // Stale and repeated receipts are false, as with ack().
    expect(await q.ackMany([a.receipt, b.receipt, b.receipt])).toEqual([false, true, false]);
    expect(await q.ackMany([])).toEqual([]);
    expect((await q.stats()).acked).toBe(3);
  });

  it('nackMany gives each delivery back, after delayMs or each backoff', async () => {
    const q = await open();
    const [a, b] = await deliveries(q, 'jobs', 2);
    // durable: the retries are held again before the clock is stepped past them.
    expect(
      await q.nackMany([a.receipt, 'gone', b.receipt], { delayMs: 500, durable: true }),
    ).toEqual([true, false, true]);
    expect(await q.nackMany([a.receipt])).toEqual([false]);
    await advance(clock, 499, 100, q);
    expect(await q.receive('jobs', { max: 10 })).toEqual([]);
    await advance(clock, 1, 1, q);
    const again = await q.receive('jobs', { max: 10 });
    expect(again.map((m) => [m.id, m.attempts])).toEqual([
      [a.id, 2],
      [b.id, 2],
    ]);
    // Without delayMs: each message's own backoff (100 ms fixed).
    expect(
      await q.nackMany(
        again.map((m) => m.receipt),
        { durable: true },
      ),
    ).toEqual([true, true]);
    await advance(clock, 99, 100, q);
    expect(await q.receive('jobs', { max: 10 })).toEqual([]);
    await advance(clock, 1, 1, q);
    expect(await q.receive('jobs', { max: 10 })).toHaveLength(2);
    expect((await q.stats()).nacked).toBe(4);
  });

  it('refuses bad input with a named error before touching any receipt', async () => {
    const q = await open();
    const [a] = await deliveries(q, 'jobs', 1);
    await expect(q.ackMany('r' as never)).rejects.toMatchObject({
      name: 'TickwheelTypeError',
      code: 'ERR_TICKWHEEL_INVALID_MESSAGE',
    });
    await expect(q.ackMany([a.receipt, 7] as never)).rejects.toMatchObject({
      name: 'TickwheelTypeError',
      code: 'ERR_TICKWHEEL_INVALID_MESSAGE',
      message: expect.stringContaining('receipts[1]'),
    });
    await expect(q.nackMany([a.receipt], { delayMs: -1 })).rejects.toMatchObject({
      name: 'TickwheelRangeError',
      code: 'ERR_TICKWHEEL_INVALID_OPTION',
    });
    await expect(q.nackMany([a.receipt], null as never)).rejects.toMatchObject({
      name: 'TickwheelTypeError',
      code: 'ERR_TICKWHEEL_INVALID_OPTION',
    });
    await expect(q.nackMany(undefined as never)).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_MESSAGE',
    });
    // Nothing above acked or nacked the delivery.
    expect((await q.get(a.id))?.status).toBe('inflight');
    expect(await q.ackMany([a.receipt])).toEqual([true]);
  });

  it('refuses calls once closed', async () => {
    const q = await open();
    await q.close();
    await expect(q.ackMany([])).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_CLOSED' });
    await expect(q.nackMany([])).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_CLOSED' });
    queue = undefined;
  });
});

describe('receipts', () => {
  it('never start with a dash, so no command line takes one for an option', async () => {
    const script = `
      const { DelayQueue, MemoryStore } = await import(${JSON.stringify(
        new URL('../../dist/delay-queue.js', import.meta.url).href,
      )});
      const queue = await DelayQueue.open({ store: new MemoryStore() });
      await queue.schedule({ topic: 't', payload: 1 });
      const [message] = await queue.receive('t', { waitMs: 10000 });
      console.log(message.receipt);
      await queue.close();
    `;
    // The prefix is drawn once per process: look at many processes' receipts.
    const { spawnSync } = await import('node:child_process');
    for (let i = 0; i < 40; i++) {
      const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
        encoding: 'utf8',
      });
      expect(run.status, run.stderr).toBe(0);
      expect(run.stdout.trim()).toMatch(/^[A-Za-z0-9]/);
    }
  });
});
