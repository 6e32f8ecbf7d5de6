import { describe, expect, it } from 'vitest';
import {
  IdHash,
  IdTable,
  hashId,
  hashIdBytes,
  type IdTableArrays,
} from '../../src/store/file/id-table.js';
import { seededRandom as random } from '../support/random.mjs';

/** A whole copy, as a snapshot takes one (any growth in progress is finished first). */
function copyOf(table: IdTable): IdTableArrays {
  table.beginCopy();
  while (!table.copyStep(1 << 20));
  return table.endCopy()!;
}

/** Whether entries are still moving into a bigger table (a step of 0 moves none). */
function growing(table: IdTable): boolean {
  return !table.growStep(0);
}

describe('IdTable against a Map', () => {
  it('agrees on add, set, get, delete, remove, reserve, copy and adopt over random operations', () => {
    for (const seed of [1, 2, 3, 4]) {
      const rand = random(seed);
      const table = new IdTable(8);
      const model = new Map<string, number>();
      // Few distinct low halves, so probe sequences collide, wrap and cross deleted slots.
      const keyOf = (): [number, number] => [
        Math.floor(rand() * 64) * 67_108_864 + 1,
        Math.floor(rand() * 50) + 1,
      ];
      for (let step = 0; step < 6000; step++) {
        const [low, high] = keyOf();
        const key = `${low}:${high}`;
        const op = rand();
        if (op < 0.35) {
          const value = Math.floor(rand() * 2 ** 40);
          expect(table.add(low, high, value)).toBe(!model.has(key));
          if (!model.has(key)) model.set(key, value);
        } else if (op < 0.5) {
          const value = Math.floor(rand() * 2 ** 40);
          table.set(low, high, value);
          model.set(key, value);
        } else if (op < 0.65) {
          expect(table.delete(low, high)).toBe(model.delete(key));
        } else if (op < 0.75) {
          expect(table.remove(low, high)).toBe(model.get(key) ?? -1);
          model.delete(key);
        } else if (op < 0.995) {
          expect(table.get(low, high)).toBe(model.get(key) ?? -1);
        } else if (op < 0.998) {
          table.reserve(model.size * 2 + 10);
        } else {
          const copy = new IdTable();
          copy.adoptArrays(copyOf(table));
          expect(copy.size).toBe(table.size);
          for (const [k, v] of model) {
            const [l, h] = k.split(':').map(Number);
            expect(copy.get(l, h)).toBe(v);
          }
        }
        expect(table.size).toBe(model.size);
      }
      const seen = new Map<string, number>();
      table.forEach((low, high, value) => seen.set(`${low}:${high}`, value));
      expect(seen).toEqual(model);
    }
  });

  it('copies itself a piece at a time while it changes: the copy is the table at the end', () => {
    for (const seed of [5, 6, 7]) {
      const rand = random(seed);
      const table = new IdTable(20_000);
      const keys: Array<[number, number]> = [];
      for (let i = 0; i < 12_000; i++) {
        const key: [number, number] = [Math.floor(rand() * 2 ** 32) || 1, i + 1];
        table.add(key[0], key[1], i);
        keys.push(key);
      }
      table.beginCopy();
      let done = false;
      while (!done) {
        done = table.copyStep(512);
        // Changes anywhere: in copied slots (copied again at the end) and not yet copied ones.
        for (let j = 0; j < 20; j++) {
          const [low, high] = keys[Math.floor(rand() * keys.length)];
          const op = rand();
          if (op < 0.4) table.set(low, high, Math.floor(rand() * 2 ** 40));
          else if (op < 0.7) table.delete(low, high);
          else table.add(low, high, 7);
        }
      }
      // A change between the last step and the end is in the copy too.
      table.set(keys[0][0], keys[0][1], 123);
      const copy = table.endCopy();
      expect(copy).toBeDefined();
      expect(copy).toEqual(copyOf(table));
    }
  });

  it('a copy in progress is void once the table grows (its slots all move)', () => {
    const table = new IdTable(16);
    for (let i = 1; i <= 10; i++) table.add(i * 100_000_000, i, i);
    table.beginCopy();
    table.copyStep(4);
    for (let i = 11; i <= 100; i++) table.add(i * 10_000_000, i, i);
    expect(table.endCopy()).toBeUndefined();
    // beginCopy finishes a growth in progress first, so the copy holds every entry.
    table.beginCopy();
    expect(table.copyStep(1_000_000)).toBe(true);
    expect(table.endCopy()).toEqual(copyOf(table));
  });

  it('grows a few entries per add: every operation answers as a Map would meanwhile', () => {
    const rand = random(11);
    const table = new IdTable(1000);
    const model = new Map<string, number>();
    const keyOf = (): [number, number] => [Math.floor(rand() * 2 ** 32) || 1, 1 + (model.size % 7)];
    let growths = 0;
    let wasGrowing = false;
    const keys: Array<[number, number]> = [];
    for (let step = 0; step < 30_000; step++) {
      const op = rand();
      if (op < 0.6 || keys.length === 0) {
        const [low, high] = keyOf();
        const value = step;
        if (table.add(low, high, value)) {
          model.set(`${low}:${high}`, value);
          keys.push([low, high]);
        }
      } else {
        const [low, high] = keys[Math.floor(rand() * keys.length)];
        const key = `${low}:${high}`;
        if (op < 0.75) {
          table.set(low, high, step);
          model.set(key, step);
        } else if (op < 0.8) {
          expect(table.delete(low, high)).toBe(model.delete(key));
        } else if (op < 0.85) {
          expect(table.remove(low, high)).toBe(model.get(key) ?? -1);
          model.delete(key);
        } else {
          expect(table.get(low, high)).toBe(model.get(key) ?? -1);
        }
      }
      if (growing(table) && !wasGrowing) growths++;
      wasGrowing = growing(table);
      expect(table.size).toBe(model.size);
    }
    expect(growths).toBeGreaterThan(3);
    for (const [key, value] of model) {
      const [low, high] = key.split(':').map(Number);
      expect(table.get(low, high)).toBe(value);
    }
    // growStep finishes a growth on request; a copy begun meanwhile is void once one starts.
    while (!table.growStep(100));
    expect(growing(table)).toBe(false);
    table.beginCopy();
    table.copyStep(10);
    while (!growing(table)) table.add(Math.floor(rand() * 2 ** 32) || 1, 99, 1);
    expect(table.endCopy()).toBeUndefined();
  });

  it('refuses a hash it holds even when that add is the one that starts a growth', () => {
    for (let fill = 1; fill <= 40; fill++) {
      const table = new IdTable(16);
      for (let i = 1; i <= fill; i++) table.add(i * 97_000_000, i, i);
      // Whichever add crosses the 80 % mark, an existing hash is still refused.
      for (let i = 1; i <= fill; i++) expect(table.add(i * 97_000_000, i, 0)).toBe(false);
      expect(table.size).toBe(fill);
      table.delete(97_000_000, 1);
      expect(table.get(97_000_000, 1)).toBe(-1);
      expect(table.size).toBe(fill - 1);
    }
  });

  it('keeps a second value per entry while it is switched on, across growth', () => {
    const table = new IdTable(4);
    table.useAux(true);
    for (let i = 1; i <= 1000; i++) table.add(i * 4_000_000, i, i * 10, i * 100);
    const aux = new Map<number, number>();
    table.forEach((low, high, _value, second) => aux.set(high, second));
    for (let i = 1; i <= 1000; i++) {
      expect(table.get(i * 4_000_000, i)).toBe(i * 10);
      expect(aux.get(i)).toBe(i * 100);
    }
    expect(aux.size).toBe(1000);
    // 16 bytes a slot, and 8 more for the second value while it is on.
    const withAux = table.bytes;
    table.useAux(false);
    let seen = 0;
    table.forEach((_low, _high, _value, second) => {
      expect(second).toBeNaN();
      seen++;
    });
    expect(seen).toBe(1000);
    expect(table.bytes).toBe((withAux / 24) * 16);
  });

  it('stores ids by their 64-bit hash, never the reserved empty or deleted keys', () => {
    const table = new IdTable();
    const hash = new IdHash();
    for (let i = 0; i < 10_000; i++) {
      hashId(`id-${i}`, hash);
      expect(hash.low === 0 && hash.high === 0).toBe(false);
      expect(hash.low === 0xffffffff && hash.high === 0xffffffff).toBe(false);
      expect(table.add(hash.low, hash.high, i)).toBe(true);
    }
    for (let i = 0; i < 10_000; i++) {
      hashId(`id-${i}`, hash);
      expect(table.get(hash.low, hash.high)).toBe(i);
    }
    // Between 53% and 80% full after growth: 16 bytes a slot, 20-30 bytes a live id.
    while (!table.growStep(1 << 20));
    const capacity = table.bytes / 16;
    expect(table.size / capacity).toBeGreaterThan(0.5);
    expect(table.size / capacity).toBeLessThanOrEqual(0.8);
  });

  it('hashes an id the same from its string and from its bytes in a record', () => {
    const fromString = new IdHash();
    const fromBytes = new IdHash();
    const record = Buffer.alloc(300);
    for (const id of ['a', 'order-1', 'x'.repeat(200), 'id-0', 'id-1', 'Zz_9:.-']) {
      hashId(id, fromString);
      record.write(id, 7, 'latin1');
      hashIdBytes(record, 7, id.length, fromBytes);
      expect([fromBytes.low, fromBytes.high]).toEqual([fromString.low, fromString.high]);
    }
    // Two ids that differ in one character differ in both halves.
    hashId('order-1', fromString);
    hashId('order-2', fromBytes);
    expect(fromBytes.low).not.toBe(fromString.low);
    expect(fromBytes.high).not.toBe(fromString.high);
  });
});
