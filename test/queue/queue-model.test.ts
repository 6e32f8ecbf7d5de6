import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/index.js';
import type { DelayQueue } from '../../src/delay-queue.js';
import { NearHorizon } from '../../src/queue/near.js';
import { T0, advance, fileKind, memoryKind } from './harness.js';

/**
 * The queue against a reference model: a map of live messages with their due time and the
 * sequence number of their last (re)scheduling. After each step, receiving everything from a
 * topic must return exactly the model's due messages, ordered by (due time, sequence), with
 * their payloads; nothing early, nothing cancelled or acked, nothing lost across a reopen.
 */

interface ModelMessage {
  id: string;
  deliverAt: number;
  seq: number;
  payload: number;
  state: 'waiting' | 'inflight';
}

type Op =
  | { kind: 'schedule'; delay: number; idPick: number | undefined }
  | { kind: 'cancel'; pick: number }
  | { kind: 'reschedule'; pick: number; delay: number }
  | { kind: 'advance'; ms: number }
  | { kind: 'receive'; ack: boolean; nackDelay: number }
  | { kind: 'reopen' };

// A few fixed delays, so that messages scheduled between two clock moves share a due time.
const delay = fc.oneof(
  fc.integer({ min: 0, max: 300 }),
  fc.integer({ min: 0, max: 4000 }),
  fc.constantFrom(50, 500, 2500),
);
const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc
      .tuple(delay, fc.option(fc.integer({ min: 0, max: 5 }), { nil: undefined }))
      .map(([d, idPick]) => ({ kind: 'schedule' as const, delay: d, idPick })),
  },
  { weight: 1, arbitrary: fc.nat().map((pick) => ({ kind: 'cancel' as const, pick })) },
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.nat(), delay)
      .map(([pick, d]) => ({ kind: 'reschedule' as const, pick, delay: d })),
  },
  {
    weight: 5,
    arbitrary: fc.integer({ min: 1, max: 1500 }).map((ms) => ({ kind: 'advance' as const, ms })),
  },
  {
    weight: 5,
    arbitrary: fc
      .tuple(fc.boolean(), fc.integer({ min: 0, max: 500 }))
      .map(([ack, nackDelay]) => ({ kind: 'receive' as const, ack, nackDelay })),
  },
  { weight: 1, arbitrary: fc.constant({ kind: 'reopen' as const }) },
);

async function run(makeKind: typeof memoryKind, ops: Op[]): Promise<void> {
  const kind = makeKind();
  const clock = new ManualClock(T0);
  let queue: DelayQueue = await kind.open(clock, { maxWaitMs: 0 });
  const model = new Map<string, ModelMessage>();
  let seq = 0;
  let payload = 0;
  const byDue = (a: ModelMessage, b: ModelMessage) => a.deliverAt - b.deliverAt || a.seq - b.seq;
  try {
    for (const op of ops) {
      const now = clock.now();
      const waiting = [...model.values()].filter((m) => m.state === 'waiting');
      switch (op.kind) {
        case 'schedule': {
          const id = op.idPick === undefined ? undefined : `fixed-${op.idPick}`;
          const value = payload++;
          const result = await queue.schedule({
            topic: 't',
            payload: value,
            delayMs: op.delay,
            maxAttempts: 10_000,
            ...(id === undefined ? {} : { id }),
          });
          const existing = model.get(result.id);
          if (existing !== undefined) {
            expect(result.deliverAt).toBe(existing.deliverAt);
          } else {
            expect(result.deliverAt).toBe(now + op.delay);
            model.set(result.id, {
              id: result.id,
              deliverAt: result.deliverAt,
              seq: seq++,
              payload: value,
              state: 'waiting',
            });
          }
          break;
        }
        case 'cancel': {
          if (waiting.length === 0) break;
          const target = waiting[op.pick % waiting.length];
          expect(await queue.cancel(target.id)).toBe(true);
          model.delete(target.id);
          expect(await queue.cancel(target.id)).toBe(false);
          break;
        }
        case 'reschedule': {
          if (waiting.length === 0) break;
          const target = waiting[op.pick % waiting.length];
          expect(await queue.reschedule(target.id, { delayMs: op.delay })).toBe(true);
          target.deliverAt = now + op.delay;
          target.seq = seq++;
          break;
        }
        case 'advance':
          await advance(clock, op.ms, 250, queue);
          break;
        case 'receive': {
          await queue.settled();
          clock.advance(0);
          const got = await queue.receive('t', { max: 1000 });
          const due = waiting.filter((m) => m.deliverAt <= now).sort(byDue);
          expect(got.map((m) => [m.id, m.payload])).toEqual(due.map((m) => [m.id, m.payload]));
          for (const message of got) {
            expect(message.deliverAt).toBeLessThanOrEqual(clock.now());
            const entry = model.get(message.id)!;
            if (op.ack) {
              expect(await queue.ack(message.receipt)).toBe(true);
              model.delete(message.id);
            } else {
              expect(await queue.nack(message.receipt, { delayMs: op.nackDelay })).toBe(true);
              entry.deliverAt = Math.ceil(clock.now() + op.nackDelay);
              entry.seq = seq++;
            }
          }
          break;
        }
        case 'reopen': {
          if (!kind.durable) break;
          await queue.close();
          queue = await kind.open(clock, { maxWaitMs: 0 });
          break;
        }
      }
      for (const message of model.values()) {
        const info = await queue.get(message.id);
        expect(info?.deliverAt).toBe(message.deliverAt);
      }
      // The counts stats() and dueHistogram() keep (no walk over memory) add up to the model.
      const { topics } = await queue.stats();
      const t = topics.t ?? { scheduled: 0, ready: 0, inflight: 0 };
      expect(t.scheduled + t.ready + t.inflight).toBe(model.size);
      expect(t.inflight).toBe(0); // every receive acks or nacks at once
      const histogram = await queue.dueHistogram([1000, 60_000]);
      expect(histogram.reduce((a, b) => a + b, 0)).toBe(t.scheduled);
    }
  } finally {
    await queue.close();
    kind.cleanup();
  }
}

const RETRY_THEN_ADVANCE: Op[] = [
  { kind: 'schedule', delay: 0, idPick: undefined },
  { kind: 'schedule', delay: 50, idPick: undefined },
  { kind: 'reopen' },
  { kind: 'advance', ms: 2 },
  { kind: 'receive', ack: false, nackDelay: 0 },
  { kind: 'advance', ms: 48 },
  { kind: 'receive', ack: false, nackDelay: 0 },
  { kind: 'receive', ack: false, nackDelay: 0 },
];

/** The model's properties: memory store, and file store reopened at random points. */
function modelProperties(): void {
  it('memory store: same deliveries, in due order, nothing early or lost', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 10, maxLength: 60 }), (ops) =>
        run(memoryKind, ops),
      ),
      { numRuns: 200 },
    );
  });

  it('file store, reopened at random points: same deliveries, nothing lost', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 10, maxLength: 40 }), (ops) =>
        run(fileKind, ops),
      ),
      // A retry (nack, delay 0) whose write was still under way when the clock moved on: it
      // must be held at the time it was nacked, ahead of a message due later.
      { numRuns: 60, examples: [[RETRY_THEN_ADVANCE]] },
    );
    // A bound against a hang, not a measure: 60 runs of file I/O on a loaded machine.
  }, 180_000);
}

describe('DelayQueue against a reference model', modelProperties);

describe('DelayQueue against a reference model, every millisecond dense from 2 messages', () => {
  // Messages of a busy millisecond share one due timer (near.ts, DueGroup; from 64 for real)
  // and are decoded ahead (decode-ahead.ts; from 2,048 for real, only a burst gets there).
  const { denseFrom, groupFrom } = NearHorizon;
  beforeAll(() => {
    NearHorizon.denseFrom = 2;
    NearHorizon.groupFrom = 2;
  });
  afterAll(() => {
    NearHorizon.denseFrom = denseFrom;
    NearHorizon.groupFrom = groupFrom;
  });
  modelProperties();
});
