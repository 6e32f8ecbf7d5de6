import { describe, expect, it } from 'vitest';
import { PositionSet } from '../../src/store/file/position-set.js';
import { positionOf } from '../../src/store/log/positions.js';
import { seededRandom as random } from '../support/random.mjs';

describe('PositionSet', () => {
  it('agrees with a Set<number> on random adds and deletes of log positions', () => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const next = random(seed);
      const set = new PositionSet();
      const model = new Set<number>();
      // Positions as the log makes them: a few segments, offsets anywhere below 2^32.
      const pool = Array.from({ length: 3000 }, () =>
        positionOf(1 + Math.floor(next() * 4), Math.floor(next() * 2 ** 32)),
      );
      pool.push(0, positionOf(2 ** 21 - 1, 2 ** 32 - 1)); // the smallest and the largest
      for (let step = 0; step < 40_000; step++) {
        const position = pool[Math.floor(next() * pool.length)];
        // Phases that fill and drain, so that the table grows and shrinks.
        const adding = Math.floor(step / 5000) % 2 === 0 ? next() < 0.8 : next() < 0.2;
        if (adding) {
          set.add(position);
          model.add(position);
        } else {
          expect(set.delete(position)).toBe(model.delete(position));
        }
        expect(set.size).toBe(model.size);
        if (step % 997 === 0) {
          expect(new Set(set)).toEqual(model);
          expect(new Set(set.toArray())).toEqual(model);
          expect(set.toArray().length).toBe(model.size);
          for (const each of pool.slice(0, 50)) expect(set.has(each)).toBe(model.has(each));
        }
      }
      expect([...set].sort((a, b) => a - b)).toEqual([...model].sort((a, b) => a - b));
    }
  });

  it('starts from the positions given, and may be changed while iterated', () => {
    const set = new PositionSet([positionOf(1, 10), positionOf(1, 20), positionOf(2, 0)]);
    expect(set.size).toBe(3);
    for (const position of set) set.delete(position);
    expect(set.size).toBe(0);
    expect([...set]).toEqual([]);
  });

  it('holds a hundred thousand consecutive record positions and lets them all go', () => {
    const set = new PositionSet();
    const positions = Array.from({ length: 100_000 }, (_, i) => positionOf(7, i * 96));
    for (const position of positions) set.add(position);
    expect(set.size).toBe(100_000);
    expect(positions.every((position) => set.has(position))).toBe(true);
    expect(set.has(positionOf(7, 48))).toBe(false);
    for (const position of positions) expect(set.delete(position)).toBe(true);
    expect(set.size).toBe(0);
    expect(set.has(positions[0])).toBe(false);
  });
});
