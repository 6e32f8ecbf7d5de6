/** Rendezvous hashing (src/partitioned/rendezvous.ts): same answer everywhere, balanced, stable. */

import { describe, expect, it } from 'vitest';
import { ownerOf, partitionsOf } from '../../src/partitioned/rendezvous.js';

const nodes = (n: number) => Array.from({ length: n }, (_, i) => `node-${i}`);

describe('rendezvous assignment', () => {
  it('gives each partition to exactly one node, whatever the order of the member list', () => {
    const members = nodes(5);
    const reversed = [...members].reverse();
    const seen = new Map<number, string>();
    for (const node of members) {
      for (const p of partitionsOf(node, 256, members)) {
        expect(seen.has(p)).toBe(false);
        seen.set(p, node);
      }
    }
    expect(seen.size).toBe(256);
    for (let p = 0; p < 256; p++) {
      expect(ownerOf(p, members)).toBe(seen.get(p));
      expect(ownerOf(p, reversed)).toBe(seen.get(p));
    }
  });

  it('spreads partitions evenly: no node of 4 gets under half or over 1.6x its share of 1,024', () => {
    const members = nodes(4);
    for (const node of members) {
      const share = partitionsOf(node, 1024, members).length;
      expect(share).toBeGreaterThan(128);
      expect(share).toBeLessThan(410);
    }
  });

  it('moves only the partitions a joining node wins, and only those of a leaving node', () => {
    const before = nodes(4);
    const after = [...before, 'node-new'];
    let moved = 0;
    for (let p = 0; p < 1024; p++) {
      const was = ownerOf(p, before);
      const is = ownerOf(p, after);
      if (was !== is) {
        moved++;
        expect(is).toBe('node-new');
      }
    }
    // About a fifth of them: the newcomer's share.
    expect(moved).toBeGreaterThan(1024 / 5 / 2);
    expect(moved).toBeLessThan((1024 / 5) * 1.6);
    const left = before.filter((n) => n !== 'node-2');
    for (let p = 0; p < 1024; p++) {
      if (ownerOf(p, before) !== 'node-2') expect(ownerOf(p, left)).toBe(ownerOf(p, before));
    }
  });

  it('has no owner without members, and none for a node that is not a member', () => {
    expect(ownerOf(3, [])).toBeUndefined();
    expect(partitionsOf('stranger', 16, nodes(3))).toEqual([]);
  });
});
