import { describe, expect, it } from 'vitest';
import { ManualClock, TimerWheel } from '../../src/index.js';

const gc = (globalThis as { gc?: () => void }).gc;

function retainedBytes(): number {
  gc!();
  gc!();
  const usage = process.memoryUsage();
  return usage.heapUsed + usage.arrayBuffers;
}

describe('TimerWheel lean path memory', () => {
  it.runIf(gc !== undefined)('does not grow the heap per timer once warmed up', () => {
    const clock = new ManualClock(0);
    const wheel = new TimerWheel<number>({ clock, onExpire: () => {}, initialCapacity: 1 << 17 });
    const n = 100_000;
    const handles = new Float64Array(n);
    const cycle = () => {
      for (let i = 0; i < n; i++) handles[i] = wheel.schedule(1000 + ((i * 7919) % 600_000), i);
      for (let i = 0; i < n; i++) wheel.clearTimeout(handles[i]);
    };
    cycle();
    cycle();
    const before = retainedBytes();
    for (let round = 0; round < 20; round++) cycle();
    const after = retainedBytes();
    // 2 million schedule/cancel pairs: even 1 retained byte per timer would show as 2 MB.
    expect(after - before).toBeLessThan(1_000_000);
    expect(wheel.size).toBe(0);
  });

  it.runIf(gc !== undefined)('holds a million pending timers in under 48 bytes each', () => {
    const clock = new ManualClock(0);
    const before = retainedBytes();
    const wheel = new TimerWheel<number>({ clock, onExpire: () => {} });
    const n = 1_000_000;
    for (let i = 0; i < n; i++) wheel.schedule(1000 + ((i * 7919) % 600_000), i);
    const perTimer = (retainedBytes() - before) / n;
    expect(wheel.size).toBe(n);
    expect(perTimer).toBeLessThan(48);
    wheel.close();
  });
});
