import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { runNodeScript } from '../support/index.js';

const root = fileURLToPath(new URL('../..', import.meta.url));

describe('SystemClock with unref: true', () => {
  // Regression: the clock waits out the last fraction of a millisecond with setImmediate, and an
  // unref'd immediate does not stop libuv's poll phase from blocking, so every timer after the
  // first fired only when some other event (here the 2 s keep-alive) woke the loop.
  it('fires unref’d timers on time while something else keeps the process alive', async () => {
    const script = `
      import { SystemClock, TimerWheel } from ${JSON.stringify(root + 'dist/index.js')};
      const clock = new SystemClock({ epoch: true });
      const late = [];
      const wheel = new TimerWheel({ clock, unref: true, onExpire: (due) => late.push(clock.now() - due) });
      // Whole epoch milliseconds, as the delay queue uses: Node's timer then tends to wake a
      // fraction of a millisecond early, and the clock takes the setImmediate path.
      const start = Math.ceil(clock.now()) + 100;
      for (let i = 0; i < 20; i++) wheel.scheduleAt(start + i * 50, start + i * 50);
      setTimeout(() => console.log(JSON.stringify(late)), 2000);
    `;
    const { out } = await runNodeScript(script);
    const late = JSON.parse(out) as number[];
    expect(late).toHaveLength(20);
    expect(Math.min(...late)).toBeGreaterThanOrEqual(0);
    // Generous for a loaded CI machine; the bug made them ~1 s late.
    expect(Math.max(...late)).toBeLessThan(250);
  });

  // Regression: under a quarter of a millisecond from a deadline the clock waited with a ref'd
  // setImmediate, so a wheel with sub-millisecond ticks and an interval held the process forever
  // (and spun a core).
  it('lets the process end while an unref’d wheel has sub-millisecond timers pending', async () => {
    const script = `
      import { TimerWheel } from ${JSON.stringify(root + 'dist/index.js')};
      const wheel = new TimerWheel({ unref: true, resolution: 0.01 });
      let runs = 0;
      wheel.setInterval(() => runs++, 0.05);
      // Something else holds the process for a while: the interval runs meanwhile.
      const hold = setInterval(() => {
        if (runs < 20) return;
        clearInterval(hold);
        process.on('exit', () => console.log('ended'));
      }, 5);
    `;
    const { status, out } = await runNodeScript(script);
    expect({ status, out }).toEqual({ status: 0, out: 'ended' });
  });
});
