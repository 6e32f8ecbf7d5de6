/**
 * Message events of the embedded queue (src/queue/events.ts): every kind, in order, with the
 * fields they promise; watch() filters and ends; a reader that falls behind is told, not
 * silently skipped; nothing is built while nobody listens.
 */

import { describe, expect, it } from 'vitest';
import { DelayQueue, MemoryStore } from '../../src/delay-queue.js';
import type { QueueEvent } from '../../src/queue/events.js';
import { T0, advance, fileKind, memoryKind, settle, useQueues } from './harness.js';
import { waitFor } from '../support/wait-for.js';

const openQueue = useQueues();

const brief = (e: QueueEvent) => `${e.type} ${e.id} ${e.attempts}${e.reason ? ` ${e.reason}` : ''}`;

describe.each([
  ['memory store', memoryKind],
  ['file store', fileKind],
])('events on the %s', (_name, makeKind) => {
  it('reports each step of each message, in order, with its fields', async () => {
    const { clock, queue } = await openQueue(makeKind);
    const seen: QueueEvent[] = [];
    const acked: QueueEvent[] = [];
    queue.events.on('event', (event: QueueEvent) => seen.push(event));
    queue.events.on('acked', (event: QueueEvent) => acked.push(event));
    await queue.schedule({ topic: 't', payload: 1, id: 'a' });
    await queue.scheduleMany([
      { topic: 't', payload: 2, id: 'b', maxAttempts: 1 },
      { topic: 'u', payload: 3, id: 'c', delayMs: 60_000 },
    ]);
    const [a, b] = await queue.receive('t', { max: 2 });
    await queue.ack(a.receipt, { durable: true }); // its event comes once written
    await queue.nack(b.receipt, { reason: 'no luck' });
    await queue.cancel('c');
    await settle();
    expect(seen.map(brief)).toEqual([
      'scheduled a 0',
      'scheduled b 0',
      'scheduled c 0',
      'delivered a 1',
      'delivered b 1',
      'acked a 1',
      'dead b 1 no luck',
      'cancelled c 0',
    ]);
    expect(seen[0]).toEqual({
      type: 'scheduled',
      id: 'a',
      topic: 't',
      at: T0,
      deliverAt: T0,
      attempts: 0,
    });
    expect(seen[2]).toMatchObject({ topic: 'u', deliverAt: T0 + 60_000 });
    expect(acked).toEqual([seen[5]]);

    // A retry: failed, with the due time it comes back at; and a visibility timeout's reason.
    seen.length = 0;
    await queue.schedule({
      topic: 't',
      payload: 4,
      id: 'd',
      backoff: { type: 'fixed', delayMs: 500 },
    });
    const [d] = await queue.receive('t', { visibilityMs: 1_000 });
    await queue.nack(d.receipt, { reason: 'try later', durable: true });
    await advance(clock, 600, 100, queue);
    await queue.receive('t', { visibilityMs: 1_000 });
    await advance(clock, 1_100, 100, queue);
    // The timed-out retry is written (a real fsync on the file store) before 'failed' is told:
    // wait for that in real time (a few turns were not always enough on a loaded machine).
    await waitFor(() => seen.length >= 5);
    await settle();
    expect(seen.map(brief)).toEqual([
      'scheduled d 0',
      'delivered d 1',
      'failed d 1 try later',
      'delivered d 2',
      'failed d 2 visibility timeout: not acknowledged in time',
    ]);
    expect(seen[2].deliverAt).toBe(seen[2].at + 500);
  });

  it('a failure is told before the next delivery of the message, with its own attempt', async () => {
    const { clock, queue } = await openQueue(makeKind);
    const seen: QueueEvent[] = [];
    queue.events.on('event', (event: QueueEvent) => seen.push(event));
    await queue.schedule({
      topic: 'v',
      payload: 1,
      id: 'n',
      backoff: { type: 'fixed', delayMs: 0 },
    });
    await queue.schedule({
      topic: 'w',
      payload: 2,
      id: 't',
      backoff: { type: 'fixed', delayMs: 0 },
    });
    // A nack with no backoff while another receive waits: it takes the message back at once.
    const [first] = await queue.receive('v');
    const waiting = queue.receive('v', { waitMs: 5_000 });
    await settle();
    await queue.nack(first.receipt, { delayMs: 0, reason: 'again' });
    const [second] = await waiting;
    // Durable: its event, told once the ack is on disk, comes before what follows.
    await queue.ack(second.receipt, { durable: true });
    // A visibility timeout with no backoff, the same way.
    await queue.receive('w', { visibilityMs: 100 });
    const retaken = queue.receive('w', { waitMs: 5_000 });
    await advance(clock, 150, 50, queue);
    expect((await retaken).map((m) => m.attempts)).toEqual([2]);
    await settle();
    expect(seen.map(brief)).toEqual([
      'scheduled n 0',
      'scheduled t 0',
      'delivered n 1',
      'failed n 1 again',
      'delivered n 2',
      'acked n 2',
      'delivered t 1',
      'failed t 1 visibility timeout: not acknowledged in time',
      'delivered t 2',
    ]);
  });

  it('watch() filters by topic and type, and ends when its signal aborts', async () => {
    const { queue } = await openQueue(makeKind);
    const controller = new AbortController();
    const got: string[] = [];
    const reading = (async () => {
      for await (const event of queue.events.watch({
        topic: 't',
        types: ['scheduled', 'acked'],
        signal: controller.signal,
      })) {
        got.push(`${event.type} ${event.id}`);
      }
    })();
    await queue.schedule({ topic: 't', payload: 1, id: 'x' });
    await queue.schedule({ topic: 'other', payload: 1, id: 'y' });
    const [x] = await queue.receive('t');
    await queue.ack(x.receipt, { durable: true }); // its event comes once written
    await settle();
    controller.abort();
    await reading;
    expect(got).toEqual(['scheduled x', 'acked x']);
    // The watcher is gone: nothing listens any more.
    expect(queue.events.active).toBe(false);
  });

  it('a reader that falls behind its buffer is told events were lost', async () => {
    const { queue } = await openQueue(makeKind);
    const events = queue.events.watch({ buffer: 3 });
    await queue.scheduleMany(Array.from({ length: 5 }, (_, i) => ({ topic: 't', payload: i })));
    const read: string[] = [];
    await expect(
      (async () => {
        for await (const event of events) read.push(event.type);
      })(),
    ).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_EVENTS_LOST' });
    // What was buffered is still handed out first.
    expect(read).toEqual(['scheduled', 'scheduled', 'scheduled']);
    expect(queue.events.active).toBe(false);
  });
});

describe('a retry whose write fails', () => {
  it('is not told as failed (the nack fails instead)', async () => {
    class FailingMoves extends MemoryStore {
      override move(): Promise<void> {
        return Promise.reject(new Error('disk full'));
      }
    }
    const queue = await DelayQueue.open({ store: new FailingMoves() });
    try {
      const seen: string[] = [];
      queue.events.on('event', (event: QueueEvent) => seen.push(brief(event)));
      await queue.schedule({ topic: 't', payload: 1, id: 'm' });
      const [m] = await queue.receive('t', { waitMs: 5_000 });
      await expect(queue.nack(m.receipt, { reason: 'later', durable: true })).rejects.toThrow(
        'disk full',
      );
      expect(seen).toEqual(['scheduled m 0', 'delivered m 1']);
    } finally {
      await queue.close();
    }
  });
});

describe('events cost nothing while nobody listens', () => {
  it('is inactive without listeners, active with one, inactive again after', async () => {
    const { queue } = await openQueue(memoryKind);
    expect(queue.events.active).toBe(false);
    const listener = () => {};
    queue.events.on('dead', listener);
    expect(queue.events.active).toBe(true);
    queue.events.off('dead', listener);
    expect(queue.events.active).toBe(false);
    // Other names (an 'error' listener, say) do not count.
    queue.events.on('error', listener);
    expect(queue.events.active).toBe(false);
  });

  it('refuses bad watch options with named errors', async () => {
    const { queue } = await openQueue(memoryKind);
    for (const options of [
      { topic: 'bad topic!' },
      { types: [] },
      { types: ['nope'] },
      { buffer: 0 },
      { signal: 'x' },
    ]) {
      expect(() => queue.events.watch(options as never), JSON.stringify(options)).toThrow(
        expect.objectContaining({
          code: expect.stringMatching(/^ERR_TICKWHEEL_INVALID_(OPTION|TOPIC)$/),
        }),
      );
    }
  });

  it('removeAllListeners() leaves events working for listeners added later', async () => {
    const { queue } = await openQueue(memoryKind);
    queue.events.on('acked', () => {});
    queue.events.removeAllListeners();
    expect(queue.events.active).toBe(false);
    const seen: string[] = [];
    queue.events.on('scheduled', (e: { id: string }) => seen.push(e.id));
    await queue.schedule({ topic: 't', payload: 1, id: 'later' });
    expect(seen).toEqual(['later']);
  });

  it('a listener that throws does not break the queue', async () => {
    const { queue } = await openQueue(memoryKind);
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    try {
      queue.events.on('scheduled', () => {
        throw new Error('listener bug');
      });
      const watched: string[] = [];
      const controller = new AbortController();
      const reading = (async () => {
        for await (const e of queue.events.watch({ signal: controller.signal }))
          watched.push(e.type);
      })();
      await expect(queue.schedule({ topic: 't', payload: 1 })).resolves.toMatchObject({
        id: expect.any(String),
      });
      expect(await queue.receive('t')).toHaveLength(1);
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings.map((w) => w.message)).toContain('listener bug');
      // The others still had the event.
      controller.abort();
      await reading;
      expect(watched).toContain('scheduled');
    } finally {
      process.off('warning', onWarning);
    }
  });
});
