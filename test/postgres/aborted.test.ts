/**
 * A statement PostgreSQL aborted to break a deadlock (40P01) or a serialization conflict (40001)
 * changed nothing: the driver makes it again, a few times; any other failure is named at once.
 * (Two schedules making the same span's table while appending elsewhere can deadlock on the
 * parent table: seen in the conformance suite's list test on a loaded machine.)
 */

import { describe, expect, it } from 'vitest';
import { runAgainIfAborted } from '../../src/postgres/reads.js';

/** A session whose statements fail with `codes` in turn, then answer one row. */
function failing(...codes: string[]) {
  const seen: string[] = [];
  return {
    seen,
    async query(text: string) {
      seen.push(text);
      const code = codes.shift();
      if (code === undefined) return { rows: [{ v: 1 }] };
      throw Object.assign(new Error(`failed with ${code}`), { code });
    },
  };
}

describe('a statement PostgreSQL aborted', () => {
  it('is made again after a deadlock or a serialization failure', async () => {
    const session = failing('40P01', '40001');
    expect(await runAgainIfAborted(session, 'tw_x', 'SELECT 1', [])).toEqual([{ v: 1 }]);
    expect(session.seen).toHaveLength(3);
  });

  it('fails, named, after four tries', async () => {
    const session = failing('40P01', '40P01', '40P01', '40P01');
    await expect(runAgainIfAborted(session, 'tw_x', 'SELECT 1', [])).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_UNAVAILABLE',
      message: /tw_x: failed with 40P01/,
    });
    expect(session.seen).toHaveLength(4);
  });

  it('is not made again after any other failure', async () => {
    const session = failing('23505');
    await expect(runAgainIfAborted(session, 'tw_x', 'SELECT 1', [])).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_STATE',
    });
    expect(session.seen).toHaveLength(1);
  });
});
