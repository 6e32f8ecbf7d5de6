/**
 * idempotent()'s own checks, over a store that keeps done keys in a Map (the stores themselves
 * are tested against real PostgreSQL and Valkey in the files beside this one).
 */

import { describe, expect, it, vi } from 'vitest';
import { idempotent } from '../../src/idempotent/index.js';
import { emptyStats, type IdempotencyStore, type Outcome } from '../../src/idempotent/types.js';

function mapStore(): IdempotencyStore<undefined> & { done: Set<string> } {
  const done = new Set<string>();
  return {
    done,
    async once(key, effect): Promise<Outcome> {
      if (done.has(key)) return 'duplicate';
      await effect(undefined);
      done.add(key);
      return 'ran';
    },
    stats: emptyStats,
    close: async () => {},
  };
}

describe('idempotent()', () => {
  it('refuses a message the default key cannot tell apart, rather than taking it for a duplicate', async () => {
    const store = mapStore();
    const seen: string[] = [];
    const effect = async (m: { body: string }) => void seen.push(m.body);
    const handler = idempotent(effect as never, { store });
    for (const message of [{ messageId: 'm1', body: 'first' }, null, { id: 1, topic: 't' }]) {
      await expect(handler(message as never)).rejects.toMatchObject({
        code: 'ERR_TICKWHEEL_INVALID_MESSAGE',
        message: /give idempotent\(\) a key option/,
      });
    }
    expect(seen).toEqual([]);
    expect(store.done.size).toBe(0);
    // With a key of its own, such messages are told apart.
    type Foreign = { messageId: string; body: string };
    const keyed = idempotent(((m: Foreign) => seen.push(m.body)) as never, {
      store,
      key: (m: unknown) => (m as Foreign).messageId,
    });
    await keyed({ messageId: 'm1', body: 'first' } as never);
    await keyed({ messageId: 'm2', body: 'second' } as never);
    expect(seen).toEqual(['first', 'second']);
  });

  it('refuses a key no store could keep as it is, before the store sees it', async () => {
    const store = mapStore();
    const handler = idempotent((_m: { key: string; id: string; topic: string }) => {}, {
      store,
      key: (m) => m.key,
    });
    const refused = {
      '': /a non-empty string/,
      'a\u0000b': /without NUL characters/,
      'half \ud800 a pair': /lone surrogate/,
      ['k'.repeat(1025)]: /at most 1024 bytes/,
      ['é'.repeat(513)]: /at most 1024 bytes/,
    };
    for (const [key, why] of Object.entries(refused)) {
      await expect(handler({ key, id: 'x', topic: 't' })).rejects.toMatchObject({
        code: 'ERR_TICKWHEEL_INVALID_OPTION',
        message: why,
      });
    }
    expect(store.done.size).toBe(0);
    for (const key of ['k'.repeat(1024), 'é'.repeat(512), 'a whole pair: 😀']) {
      await handler({ key, id: 'x', topic: 't' });
    }
    expect(store.done.size).toBe(3);
  });

  it('refuses unknown options and an onOutcome that is not a function, by name', () => {
    const store = mapStore();
    expect(() => idempotent(() => {}, { store, onOutcom: () => {} } as never)).toThrow(
      expect.objectContaining({
        code: 'ERR_TICKWHEEL_INVALID_OPTION',
        message: expect.stringMatching(/did you mean "onOutcome"/),
      }),
    );
    expect(() => idempotent(() => {}, { store, onOutcome: 5 } as never)).toThrow(
      expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_CALLBACK' }),
    );
    expect(() => idempotent(() => {}, null as never)).toThrow(
      expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_OPTION' }),
    );
  });

  it('keeps a delivery whose effect ran when onOutcome throws, and warns of it', async () => {
    const store = mapStore();
    const emit = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    try {
      const handler = idempotent(() => {}, {
        store,
        onOutcome: () => {
          throw new Error('metrics down');
        },
      });
      const message = { id: 'a', topic: 't' };
      await expect(handler(message)).resolves.toBeUndefined();
      await expect(handler(message)).resolves.toBeUndefined();
      expect(store.done).toEqual(new Set(['t/a']));
      expect(emit).toHaveBeenCalledTimes(2);
      expect(emit.mock.calls[0][0]).toMatchObject({
        code: 'ERR_TICKWHEEL_LISTENER_FAILED',
        message: /onOutcome threw: metrics down/,
      });
    } finally {
      emit.mockRestore();
    }
  });
});
