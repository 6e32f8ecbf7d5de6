import { setImmediate as turn } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { HeldIds } from '../../src/queue/held-ids.js';
import type { NearMessage } from '../../src/queue/near-message.js';
import { newMessageId } from '../../src/queue/message.js';
import { seededInt } from '../support/random.mjs';

/** Just what HeldIds reads of a message. */
function message(id: string): NearMessage {
  return { id, held: true } as NearMessage;
}

describe('HeldIds.held()', () => {
  it('gives every held message once, also while a sweep moves them to a new map', async () => {
    const ids = new HeldIds(() => false);
    const all = Array.from({ length: 10_000 }, (_, i) => message(`m${i}`));
    for (const each of all) ids.add(each);
    // Released ones are stale entries: enough of them start a sweep, a step a turn.
    const kept = [...all.slice(0, 500), ...all.slice(9_500)];
    for (const each of all.slice(500, 9_500)) {
      each.held = false;
      ids.released(each);
    }
    await turn();
    // The first step moved the first held ones (they are in both maps now), not the last ones.
    const late = message('late');
    ids.add(late);
    const held = [...ids.held()].map((each) => each.id);
    const expected = ['late', ...kept.map((each) => each.id)];
    expect(held.sort()).toEqual(expected.sort());
    // Once the sweep is over, the same.
    for (let i = 0; i < 10; i++) await turn();
    expect([...ids.held()].map((each) => each.id).sort()).toEqual(expected.sort());
  });
});

describe('HeldIds against a model', () => {
  it('finds every held message by id, made here or given, across chunks and sweeps', async () => {
    for (const seed of [1, 2, 3]) {
      const int = seededInt(seed);
      const ids = new HeldIds(() => int(2) === 0);
      /** The model: the held message of each id. */
      const model = new Map<string, NearMessage>();
      const made: string[] = [];
      const given: string[] = [];
      const check = (id: string) => {
        const found = ids.entry(id);
        expect(found?.held === true ? found : undefined).toBe(model.get(id));
      };
      for (let step = 0; step < 20_000; step++) {
        const roll = int(100);
        if (roll < 45 || made.length === 0) {
          // A new id made here, or one a user gives: plain, or shaped like ours (same number
          // with another time, or the number of an id made here written with a leading 0).
          let id = newMessageId(1e12 + step);
          const kind = made.length === 0 ? 9 : int(10);
          if (kind === 0) id = `user-${int(500)}`;
          else if (kind === 1) id = `${'1'.repeat(9)}${made[int(made.length)].slice(9)}`;
          else if (kind === 2) {
            const mine = made[int(made.length)];
            id = `${mine.slice(0, -1)}0${mine.slice(-1)}`;
          }
          (kind <= 2 ? given : made).push(id);
          if (model.has(id)) continue;
          const each = message(id);
          model.set(id, each);
          ids.add(each);
        } else if (roll < 90) {
          // Release a held one: recent ones mostly, now and then an old one (sparse chunks).
          const held = [...model.values()];
          const each =
            held[
              int(10) === 0 ? int(held.length) : held.length - 1 - int(Math.min(50, held.length))
            ];
          if (each === undefined) continue;
          each.held = false;
          model.delete(each.id);
          ids.released(each);
        } else {
          // The same id held again, as a retry or a horizon load does.
          const id = made[int(made.length)];
          if (model.has(id)) continue;
          const each = message(id);
          model.set(id, each);
          ids.add(each);
        }
        if (step % 97 === 0) await turn();
        check(made[int(made.length)] ?? 'none');
        check(given[int(given.length)] ?? 'none');
      }
      for (const id of [...made, ...given]) check(id);
      expect(ids.count).toBe(model.size);
      const held = [...ids.held()];
      expect(held.length).toBe(model.size);
      expect(new Set(held)).toEqual(new Set(model.values()));
    }
  });
});
