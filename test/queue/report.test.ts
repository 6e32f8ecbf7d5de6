import { describe, expect, it } from 'vitest';
import type { QueueEvent } from '../../src/queue/events.js';
import { QueueReport } from '../../src/queue/report.js';

const message = (id: string, attempts = 1) => ({ id, topic: 't', deliverAt: 100, attempts });

function listened(): { report: QueueReport; seen: string[] } {
  const report = new QueueReport(() => 1_000);
  const seen: string[] = [];
  report.events.on('event', (event: QueueEvent) =>
    seen.push(`${event.type} ${event.id}${event.reason === undefined ? '' : ` ${event.reason}`}`),
  );
  return { report, seen };
}

describe('QueueReport: one counter and one event per happening, for every backend', () => {
  it('counts and emits each happening once', async () => {
    const { report, seen } = listened();
    report.scheduled(message('a', 0));
    report.deduplicated();
    report.fired(message('a'), 150);
    report.delivered([message('a'), message('b', 2)], 160);
    report.acked(message('a'));
    report.nacked();
    report.failed(message('b', 2), 'boom');
    report.expired();
    report.dead(message('c', 3), 'visibility timeout');
    report.cancelled(message('d', 0));
    report.rescheduled();
    report.firedMany(2);
    expect(seen).toEqual([
      'scheduled a',
      'delivered a',
      'delivered b',
      'acked a',
      'failed b boom',
      'dead c visibility timeout',
      'cancelled d',
    ]);
    const figures = report.figures();
    expect(figures).toMatchObject({
      scheduled: 1,
      deduplicated: 1,
      fired: 3,
      delivered: 2,
      acked: 1,
      nacked: 1,
      expired: 1,
      dead: 1,
      cancelled: 1,
      rescheduled: 1,
      latenessMs: { count: 1, p50: 50, max: 50 },
    });
    // Only the first attempt counts for first-delivery lateness: a, 60 ms late.
    expect(figures.deliveryLatenessMs).toMatchObject({ count: 1, sum: 60 });
  });

  it('counts first-delivery lateness per message, in runs of one due time or not', () => {
    // A reference model: each first delivery late by now - max(due, hand-in time, floor).
    let seed = 7;
    const random = (n: number) => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return seed % n;
    };
    const report = new QueueReport(() => 0);
    report.recoveredAfter(95);
    const buckets = new Map<number, number>();
    let count = 0;
    let sum = 0;
    let next = 0;
    for (let batch = 0; batch < 200; batch++) {
      const now = 100 + batch * 7;
      const messages = [];
      for (let i = random(30); i >= 0; i--) {
        const m = {
          id: `m${next++}`,
          topic: 't',
          deliverAt: 90 + 5 * random(4),
          attempts: 1 + random(2),
        };
        let due = Math.max(m.deliverAt, 95);
        if (random(5) === 0) {
          const handedIn = m.deliverAt + random(20);
          report.handedInLate(m.id, handedIn);
          due = Math.max(due, handedIn);
        }
        if (m.attempts === 1) {
          const late = Math.max(0, now - due);
          count++;
          sum += late;
          buckets.set(late, (buckets.get(late) ?? 0) + 1);
        }
        messages.push(m);
      }
      report.delivered(messages, now);
    }
    const figures = report.figures().deliveryLatenessMs;
    expect(figures).toMatchObject({ count, sum });
    for (const [le, cumulative] of figures.buckets) {
      let expected = 0;
      for (const [late, n] of buckets) if (late <= le) expected += n;
      expect(cumulative, `<= ${le} ms`).toBe(expected);
    }
  });

  it("emits an ack's event once its write is durable, and none when the write failed", async () => {
    const { report, seen } = listened();
    let durable!: () => void;
    report.acked(message('a'), new Promise<void>((resolve) => (durable = resolve)));
    report.acked(message('b'), Promise.reject(new Error('disk full')));
    expect(seen).toEqual([]);
    durable();
    await new Promise((resolve) => setImmediate(resolve));
    expect(seen).toEqual(['acked a']);
    expect(report.figures()).toMatchObject({ acked: 2 });
  });

  it('counts a delivery known by its receipt only, with no event', () => {
    const { report, seen } = listened();
    report.acked(undefined);
    report.dead(undefined, 'nacked');
    report.failed(undefined, 'nacked');
    expect(seen).toEqual([]);
    expect(report.figures()).toMatchObject({ acked: 1, dead: 1 });
  });

  it('makes no event objects while nobody listens, but counts', () => {
    const report = new QueueReport(() => 0);
    report.delivered([message('a')], 5);
    report.scheduled(message('b', 0));
    expect(report.events.active).toBe(false);
    expect(report.figures()).toMatchObject({ delivered: 1, scheduled: 1 });
  });

  it("builds a schedule's event (scheduledAs) only while someone listens, and counts it either way", () => {
    const quiet = new QueueReport(() => 0);
    let built = 0;
    const make = (id: string) => () => {
      built++;
      return message(id, 0);
    };
    quiet.scheduledAs(make('a'));
    expect(built).toBe(0);
    expect(quiet.figures()).toMatchObject({ scheduled: 1 });

    const { report, seen } = listened();
    report.scheduledAs(make('b'));
    expect(built).toBe(1);
    expect(seen).toEqual(['scheduled b']);
    expect(report.figures()).toMatchObject({ scheduled: 1 });
  });
});
