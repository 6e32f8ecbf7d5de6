import { runNodeScript } from '../support/node-script.js';
import { fileURLToPath } from 'node:url';
import { describe, expect, it, vi } from 'vitest';
import { SystemClock, TimerWheel } from '../../src/index.js';

const root = fileURLToPath(new URL('../..', import.meta.url));

describe('SystemClock driving real timers', () => {
  it('fires a few hundred timers, none early, all within generous bounds', async () => {
    const clock = new SystemClock();
    const wheel = new TimerWheel({ clock });
    const lateness: number[] = [];
    const start = clock.now();
    await new Promise<void>((resolve) => {
      let left = 300;
      for (let i = 0; i < 300; i++) {
        const delay = (i * 7) % 250;
        const deadline = start + delay;
        wheel.setTimeout(() => {
          lateness.push(clock.now() - deadline);
          if (--left === 0) resolve();
        }, delay);
      }
    });
    expect(lateness).toHaveLength(300);
    expect(Math.min(...lateness)).toBeGreaterThanOrEqual(0);
    // Generous: a loaded CI machine can stall the event loop; the point is "not wildly late".
    expect(Math.max(...lateness)).toBeLessThan(1000);
    wheel.close();
  });

  it('serves several wheels with one clock', async () => {
    const clock = new SystemClock();
    const a = new TimerWheel({ clock });
    const b = new TimerWheel({ clock, resolution: 5 });
    const order: string[] = [];
    await new Promise<void>((resolve) => {
      a.setTimeout(() => order.push('a30'), 30);
      b.setTimeout(() => order.push('b10'), 10);
      a.setTimeout(() => {
        order.push('a80');
        resolve();
      }, 80);
    });
    expect(order).toEqual(['b10', 'a30', 'a80']);
  });
});

/** Runs a snippet in a fresh Node process and returns how long it took to exit, in ms. */
async function exitTime(body: string): Promise<number> {
  const script = `
    import { TimerWheel } from ${JSON.stringify(root + 'dist/index.js')};
    const t0 = performance.now();
    process.on('exit', () => console.log(Math.round(performance.now() - t0)));
    ${body}
  `;
  const { status, out, stderr } = await runNodeScript(script);
  expect(status, stderr).toBe(0);
  return Number(out);
}

describe('Keeping the process alive, like Node timers', () => {
  it('keeps the process alive while a timer is pending, and lets it exit after', async () => {
    expect(await exitTime(`new TimerWheel().setTimeout(() => {}, 300);`)).toBeGreaterThanOrEqual(
      290,
    );
  });

  it('does not keep the process alive with unref: true', async () => {
    expect(
      await exitTime(`new TimerWheel({ unref: true }).setTimeout(() => {}, 5000);`),
    ).toBeLessThan(4000);
  });

  it('does not keep the process alive once every timer is cancelled', async () => {
    const body = `const w = new TimerWheel(); w.clearTimeout(w.setTimeout(() => {}, 5000));`;
    expect(await exitTime(body)).toBeLessThan(4000);
  });
});

describe('The performance global', () => {
  it('is a plain data property holding the same object once a clock exists', () => {
    const before = performance;
    new SystemClock();
    const descriptor = Object.getOwnPropertyDescriptor(globalThis, 'performance');
    expect(descriptor?.get).toBeUndefined();
    expect(descriptor?.value).toBe(before);
    expect(descriptor).toMatchObject({ writable: true, configurable: true });
  });

  it('still follows fake timers that replace performance, as before', () => {
    const clock = new SystemClock();
    vi.useFakeTimers({ toFake: ['performance', 'setTimeout', 'clearTimeout'] });
    try {
      const wheel = new TimerWheel({ clock });
      const fired: number[] = [];
      wheel.setTimeout(() => fired.push(clock.now()), 5_000);
      const start = clock.now();
      vi.advanceTimersByTime(4_000);
      expect(fired).toEqual([]);
      vi.advanceTimersByTime(1_100);
      expect(fired).toHaveLength(1);
      expect(fired[0] - start).toBeGreaterThanOrEqual(5_000);
      wheel.close();
    } finally {
      vi.useRealTimers();
    }
  });
});
