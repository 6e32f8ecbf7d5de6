/**
 * ReadyList against a model (a plain array of current messages): random pushes, changes of
 * state (which make entries stale), takes and put-backs.
 */

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ReadyList } from '../../src/queue/ready-list.js';

interface Item {
  name: number;
  version: number;
}

type Op =
  | { kind: 'push' }
  | { kind: 'change'; pick: number }
  | { kind: 'take'; count: number }
  | { kind: 'putBack'; count: number }
  | { kind: 'reserve'; count: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.constant({ kind: 'push' as const }) },
  { weight: 2, arbitrary: fc.nat(1000).map((pick) => ({ kind: 'change' as const, pick })) },
  {
    weight: 3,
    arbitrary: fc.integer({ min: 1, max: 50 }).map((count) => ({ kind: 'take' as const, count })),
  },
  {
    weight: 1,
    arbitrary: fc.integer({ min: 1, max: 5 }).map((count) => ({ kind: 'putBack' as const, count })),
  },
  {
    weight: 1,
    arbitrary: fc
      .integer({ min: 0, max: 200 })
      .map((count) => ({ kind: 'reserve' as const, count })),
  },
);

describe('ReadyList', () => {
  it('gives the current messages in order, skipping changed ones, with put-backs in front', () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 3000 }), (ops) => {
        const list = new ReadyList<Item>();
        let model: Item[] = [];
        let next = 0;
        let taken: Item[] = [];
        for (const step of ops) {
          if (step.kind === 'push') {
            const item = { name: next++, version: 0 };
            list.push(item);
            model.push(item);
          } else if (step.kind === 'change' && model.length > 0) {
            const item = model[step.pick % model.length];
            item.version++;
            model = model.filter((m) => m !== item);
          } else if (step.kind === 'take') {
            taken = [];
            for (let i = 0; i < step.count; i++) {
              const head = list.peekCurrent();
              expect(head).toBe(model[0]);
              if (head === undefined) break;
              list.dropHead();
              model.shift();
              taken.push(head);
            }
          } else if (step.kind === 'putBack') {
            const back = taken.splice(0, step.count);
            list.putBack(back);
            model = [...back, ...model];
          } else if (step.kind === 'reserve') {
            // Room made at once: that many pushes from here do not grow the list again.
            list.reserve(step.count);
            expect(list.capacity).toBeGreaterThanOrEqual(list.length + step.count);
            expect(list.full).toBe(list.length === list.capacity);
          }
          expect(list.length).toBeGreaterThanOrEqual(model.length);
        }
        const rest: Item[] = [];
        for (let head = list.peekCurrent(); head !== undefined; head = list.peekCurrent()) {
          rest.push(head);
          list.dropHead();
        }
        expect(rest).toEqual(model);
        expect(list.length).toBe(0);
      }),
      { numRuns: 200 },
    );
  });

  it('cuts off its consumed front, so a long-lived list does not grow without bound', () => {
    const list = new ReadyList<Item>();
    for (let i = 0; i < 100_000; i++) {
      list.push({ name: i, version: 0 });
      list.peekCurrent();
      list.dropHead();
    }
    expect(list.length).toBe(0);
    const inside = list as unknown as { messages: unknown[] };
    expect(inside.messages.length).toBeLessThan(3000);
  });
});
