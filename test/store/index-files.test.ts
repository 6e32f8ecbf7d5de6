/**
 * The schedule index's files (window-index.ts): an entry's file holds its due time and starts at
 * or after the frontier, and the number of files stays bounded however due times are spread.
 */

import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/index.js';
import { DelayQueue } from '../../src/delay-queue.js';
import { fileFor } from '../../src/store/file/window-index.js';
import { tempDir, trackQueues } from '../crash/disk.js';
import { advance } from '../queue/harness.js';

const MINUTE = 60_000;

describe('index files', () => {
  it('puts an entry in a file that holds its due time and starts at or after the frontier', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 86_400_000 }),
        // Epoch ms up to the year 2500, due times up to 250 years ahead.
        fc.integer({ min: 0, max: 16_725_225_600_000 }),
        fc.integer({ min: 0, max: 250 * 365 * 86_400_000 }),
        (windowMs, frontierMs, ahead) => {
          const frontier = Math.floor(frontierMs / windowMs) * windowMs;
          const deliverAt = frontier + ahead;
          const file = fileFor(deliverAt, frontier, windowMs);
          expect(file.start).toBeLessThanOrEqual(deliverAt);
          expect(file.end).toBeGreaterThan(deliverAt);
          expect(file.start).toBeGreaterThanOrEqual(frontier);
          expect(file.end - file.start).toBe(windowMs * 2 ** file.level);
          expect(file.start % (file.end - file.start)).toBe(0);
        },
      ),
    );
  });

  it('never makes a span longer than what is ahead, where log2 rounds up', () => {
    for (let k = 40; k <= 52; k++) {
      const ahead = 2 ** k - 1; // Math.log2 gives k for these from k = 49 on
      const file = fileFor(ahead, 0, 1);
      expect(file.end - file.start).toBeLessThanOrEqual(ahead);
      expect(file.start).toBeGreaterThanOrEqual(0);
    }
  });

  it('keeps at most three files a level alive, however due times are spread', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.record({ advance: fc.integer({ min: 0, max: 10_000 }) }),
            fc.record({ due: fc.integer({ min: 0, max: 2 ** 30 }) }),
          ),
          { maxLength: 400 },
        ),
        (steps) => {
          let frontier = 0;
          const files = new Map<string, { start: number; level: number }>();
          for (const step of steps) {
            if ('advance' in step) {
              frontier += step.advance;
              // Taken once the frontier passes their start (their entries go nearer their time).
              for (const [key, file] of files) if (file.start < frontier) files.delete(key);
            } else {
              const file = fileFor(frontier + step.due, frontier, 1);
              files.set(file.key, file);
            }
            const perLevel = new Map<number, number>();
            for (const { level } of files.values()) {
              perLevel.set(level, (perLevel.get(level) ?? 0) + 1);
            }
            for (const count of perLevel.values()) expect(count).toBeLessThanOrEqual(3);
          }
        },
      ),
    );
  });
});

describe('a queue with due times a minute apart over 50,000 minutes', () => {
  const queues = trackQueues();

  it('keeps tens of index files, not one a minute, and delivers each on time', async () => {
    const dir = tempDir();
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const open = () =>
      queues.track(DelayQueue.open({ dir, clock, horizonMs: MINUTE, windowMs: MINUTE }));
    let queue = await open();
    const start = clock.now();
    const n = 50_000;
    for (let from = 0; from < n; from += 5_000) {
      await queue.scheduleMany(
        Array.from({ length: 5_000 }, (_, i) => ({
          topic: 'spread',
          payload: from + i,
          delayMs: (from + i + 2) * MINUTE,
        })),
      );
    }
    await queues.close(queue);
    const files = readdirSync(join(dir, 'index'));
    // About log2(50,000) = 16 levels, at most three files each.
    expect(files.length).toBeLessThanOrEqual(3 * 17);
    expect(files.length).toBeGreaterThan(1);

    queue = await open();
    expect((await queue.stats()).store).toMatchObject({ live: n });
    // Through the first 300 minutes: each message comes due in its minute, in order.
    const received: number[] = [];
    for (let minute = 1; minute <= 300; minute++) {
      await advance(clock, MINUTE, 15_000, queue);
      for (const message of await queue.receive('spread', { max: 10 })) {
        expect(clock.now()).toBeGreaterThanOrEqual(message.deliverAt);
        received.push(message.payload as number);
        await queue.ack(message.receipt);
      }
    }
    expect(received).toEqual(Array.from({ length: 299 }, (_, i) => i));
    expect(clock.now() - start).toBe(300 * MINUTE);
    expect(readdirSync(join(dir, 'index')).length).toBeLessThanOrEqual(3 * 17);
  });
});
