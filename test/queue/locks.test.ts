import { describe, expect, it } from 'vitest';
import { IdLocks } from '../../src/queue/locks.js';

describe('IdLocks', () => {
  it('runs operations on one id one after another in call order, other ids alongside', async () => {
    const locks = new IdLocks();
    const log: string[] = [];
    const step = (name: string, turns: number) => async () => {
      log.push(`${name} start`);
      for (let i = 0; i < turns; i++) await new Promise((r) => setImmediate(r));
      log.push(`${name} end`);
      return name;
    };
    const results = await Promise.all([
      locks.run('a', step('a1', 3)),
      locks.run('b', step('b1', 1)),
      locks.run('a', step('a2', 0)),
    ]);
    expect(results).toEqual(['a1', 'b1', 'a2']);
    expect(log.indexOf('a2 start')).toBeGreaterThan(log.indexOf('a1 end'));
    expect(log.indexOf('b1 start')).toBeLessThan(log.indexOf('a1 end'));
  });

  it('a failed operation does not block the next; busy() is true only while work is queued', async () => {
    const locks = new IdLocks();
    expect(locks.busy('a')).toBe(false);
    const failing = locks.run('a', () => Promise.reject(new Error('store failed')));
    const next = locks.run('a', async () => 'ran');
    expect(locks.busy('a')).toBe(true);
    await expect(failing).rejects.toThrow('store failed');
    await expect(next).resolves.toBe('ran');
    await locks.settled();
    await new Promise((r) => setImmediate(r));
    expect(locks.busy('a')).toBe(false);
  });
});
