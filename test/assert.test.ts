/**
 * src/assert.ts: `assert` always checks; `debugAssert` checks only under TICKWHEEL_DEBUG=1,
 * which the test suite sets (vitest.config.ts) and production does not.
 */

import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { DEBUG, TickwheelAssertionError, assert, debugAssert } from '../src/assert.js';
import { TickwheelError } from '../src/errors.js';
import { HierarchicalWheel } from '../src/index.js';

const built = pathToFileURL(join(import.meta.dirname, '../dist/assert.js')).href;

describe('assert', () => {
  it('throws a TickwheelAssertionError with the code ERR_TICKWHEEL_ASSERTION', () => {
    expect(() => assert(1 + 1 === 3, 'arithmetic broke')).toThrow(TickwheelAssertionError);
    try {
      assert(false, () => `built ${'lazily'}`);
    } catch (err) {
      expect(err).toBeInstanceOf(TickwheelError);
      expect((err as TickwheelError).code).toBe('ERR_TICKWHEEL_ASSERTION');
      expect((err as Error).message).toBe('built lazily');
    }
    expect(() => assert(true, 'fine')).not.toThrow();
  });

  it('does not build a lazy message when the condition holds', () => {
    let built = 0;
    debugAssert(true, () => String(++built));
    assert(true, () => String(++built));
    expect(built).toBe(0);
  });
});

describe('debugAssert', () => {
  it('checks in the test suite, where TICKWHEEL_DEBUG=1', () => {
    expect(DEBUG).toBe(true);
    expect(() => debugAssert(false, 'broken')).toThrow(TickwheelAssertionError);
  });

  it('is off in a plain node process, and on with TICKWHEEL_DEBUG=1', () => {
    const script = `
      import { DEBUG, debugAssert } from ${JSON.stringify(built)};
      let threw = false;
      try { debugAssert(false, 'broken'); } catch { threw = true; }
      console.log(JSON.stringify({ DEBUG, threw }));`;
    const run = (env: NodeJS.ProcessEnv) =>
      JSON.parse(
        execFileSync(process.execPath, ['--input-type=module', '-e', script], {
          env,
          encoding: 'utf8',
        }),
      ) as unknown;
    const { TICKWHEEL_DEBUG: _, ...plain } = process.env;
    expect(run(plain)).toEqual({ DEBUG: false, threw: false });
    expect(run({ ...plain, TICKWHEEL_DEBUG: '1' })).toEqual({ DEBUG: true, threw: true });
  });

  it("guards the wheel's never-early invariant: a row whose tick is corrupted is caught", () => {
    const wheel = new HierarchicalWheel();
    const index = wheel.entries.allocate();
    wheel.insert(index, 10);
    // Simulates a bug that moved a linked row's tick without relinking it.
    wheel.entries.tick[index] = 1_000;
    expect(() => wheel.advance(10, () => {})).toThrow(/expired early/);
  });
});
