/**
 * The wheel's small pure pieces, one by one, against the obvious model:
 * SlotTable (slot lists threaded through the entry store, occupancy bits, nextOccupied) and
 * EntryStore (rows, free list, handles with generations).
 */

import { describe, expect, it } from 'vitest';
import { DETACHED, EntryStore, FREE, INDEX_BITS } from '../../src/wheel/entries.js';
import { SlotTable } from '../../src/wheel/slots.js';
import { seededRandom as random } from '../support/random.mjs';

/** Rows of a slot in list order, following `next` until the end marker. */
function rowsOf(slots: SlotTable, entries: EntryStore, code: number): number[] {
  const rows: number[] = [];
  for (let index = slots.head(code); index >= 0; index = entries.next[index]) rows.push(index);
  return rows;
}

describe('SlotTable', () => {
  it.each([
    [1, 1],
    [20, 3],
    [32, 2],
    [64, 4],
    [100, 3],
  ])('matches a model of arrays per slot (%i slots x %i groups)', (groupSize, groups) => {
    for (let seed = 1; seed <= 10; seed++) {
      const next = random(seed * 7919 + groupSize);
      const entries = new EntryStore(16);
      const slots = new SlotTable(entries, groupSize, 1);
      slots.ensureGroups(groups);
      const model = new Map<number, number[]>();
      const where = new Map<number, number>();
      const codes: number[] = [];
      for (let g = 0; g < groups; g++) {
        for (let s = 0; s < groupSize; s++) codes.push(slots.code(g, s));
      }

      for (let step = 0; step < 400; step++) {
        const roll = next();
        if (roll < 0.55 || where.size === 0) {
          const index = entries.allocate();
          const code = codes[Math.floor(next() * codes.length)];
          slots.append(code, index);
          model.set(code, [...(model.get(code) ?? []), index]);
          where.set(index, code);
        } else if (roll < 0.9) {
          const rows = [...where.keys()];
          const index = rows[Math.floor(next() * rows.length)];
          const code = where.get(index) as number;
          slots.unlink(index);
          expect(entries.prev[index]).toBe(DETACHED);
          model.set(
            code,
            (model.get(code) ?? []).filter((row) => row !== index),
          );
          where.delete(index);
          entries.release(index);
        } else {
          const code = codes[Math.floor(next() * codes.length)];
          const taken: number[] = [];
          for (let index = slots.takeAll(code); index >= 0; index = entries.next[index]) {
            taken.push(index);
          }
          expect(taken).toEqual(model.get(code) ?? []);
          for (const index of taken) {
            where.delete(index);
            entries.release(index);
          }
          model.set(code, []);
        }

        // Compared by hand, and handed to expect() only on a mismatch: expect() per slot per step
        // would cost more than everything else here.
        for (const code of codes) {
          const expected = model.get(code) ?? [];
          const actual = rowsOf(slots, entries, code);
          if (actual.join() !== expected.join() || slots.isOccupied(code) !== expected.length > 0) {
            expect({ code, actual, occupied: slots.isOccupied(code) }).toEqual({
              code,
              actual: expected,
              occupied: expected.length > 0,
            });
          }
        }
        // nextOccupied from every start position of one random group, against a linear scan.
        const group = Math.floor(next() * groups);
        let expected = -1;
        for (let from = groupSize; from >= 0; from--) {
          if (from < groupSize && (model.get(slots.code(group, from)) ?? []).length > 0) {
            expected = from;
          }
          const actual = slots.nextOccupied(group, from);
          if (actual !== expected)
            expect({ group, from, actual }).toEqual({ group, from, expected });
        }
      }
    }
  });

  it('lays groups out on 32-slot words, so groups never share an occupancy word', () => {
    const entries = new EntryStore(16);
    const slots = new SlotTable(entries, 20, 2);
    expect(slots.stride).toBe(32);
    expect(slots.code(1, 0)).toBe(32);
    slots.append(slots.code(0, 19), entries.allocate());
    // Slot 19 of group 0 is the last; nothing of group 1 is occupied.
    expect(slots.nextOccupied(1, 0)).toBe(-1);
    expect(slots.nextOccupied(0, 0)).toBe(19);
    expect(slots.nextOccupied(0, 20)).toBe(-1);
  });

  it('keeps what it holds when groups are added', () => {
    const entries = new EntryStore(16);
    const slots = new SlotTable(entries, 64, 1);
    const a = entries.allocate();
    const b = entries.allocate();
    slots.append(slots.code(0, 63), a);
    slots.append(slots.code(0, 63), b);
    slots.ensureGroups(3);
    expect(slots.groups).toBe(3);
    expect(rowsOf(slots, entries, slots.code(0, 63))).toEqual([a, b]);
    expect(slots.nextOccupied(0, 0)).toBe(63);
    expect(slots.nextOccupied(2, 0)).toBe(-1);
  });
});

describe('EntryStore', () => {
  it('recycles released rows and makes their old handles inert', () => {
    const entries = new EntryStore(16);
    const index = entries.allocate();
    const handle = entries.handleOf(index);
    expect(entries.indexOf(handle)).toBe(index);
    entries.release(index);
    expect(entries.prev[index]).toBe(FREE);
    expect(entries.indexOf(handle)).toBe(-1);
    const again = entries.allocate();
    expect(again).toBe(index);
    expect(entries.handleOf(again)).not.toBe(handle);
    expect(entries.indexOf(handle)).toBe(-1);
    expect(entries.indexOf(entries.handleOf(again))).toBe(again);
  });

  it('never hands out handle 0, and refuses handles that are not its own', () => {
    const entries = new EntryStore(16);
    const index = entries.allocate();
    expect(entries.handleOf(index)).toBeGreaterThan(0);
    for (const forged of [0, -1, 0.5, NaN, Infinity, 2 ** INDEX_BITS + 5, '1' as unknown]) {
      expect(entries.indexOf(forged as number)).toBe(-1);
    }
  });

  it('grows by doubling and tells its listeners, keeping every row', () => {
    const entries = new EntryStore(16);
    const seen: number[] = [];
    entries.onGrow((capacity) => seen.push(capacity));
    const rows = Array.from({ length: 40 }, () => entries.allocate());
    rows.forEach((index, i) => (entries.tick[index] = i));
    expect(seen).toEqual([32, 64]);
    expect(entries.capacity).toBe(64);
    expect(rows.map((index) => entries.tick[index])).toEqual(rows.map((_, i) => i));
    expect(entries.live).toBe(40);
  });
});

describe('EntryStore rows never used', () => {
  it('refuses forged handles naming rows never handed out, before and after growth', () => {
    const entries = new EntryStore(16);
    const first = entries.allocate();
    expect(entries.indexOf(entries.handleOf(first))).toBe(first);
    // Row 5 was never used: no generation names it, 0 (its zeroed memory) or 1 (its first).
    expect(entries.indexOf(5)).toBe(-1);
    expect(entries.indexOf(2 ** 28 + 5)).toBe(-1);
    for (let i = 0; i < 20; i++) entries.allocate();
    expect(entries.capacity).toBe(32);
    expect(entries.indexOf(2 ** 28 + 25)).toBe(-1);
    expect(entries.indexOf(25)).toBe(-1);
    // A row in use has generation 1 from allocate(), not the 0 of zeroed memory.
    expect(entries.indexOf(2 ** 28 + 20)).toBe(20);
    expect(entries.indexOf(20)).toBe(-1);
  });
});
