import { setImmediate as turn } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { HeldIds } from '../../src/queue/held-ids.js';
import type { NearMessage } from '../../src/queue/near-message.js';

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
      ids.released();
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
