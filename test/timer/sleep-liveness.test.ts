/**
 * An awaited sleep() keeps a plain `node` process alive, as awaiting Node's own
 * `timers/promises` setTimeout does, even on a wheel made with `unref: true`; `{ ref: false }`
 * lets the process end, as `{ ref: false }` does for Node's.
 */

import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { runNodeScript } from '../support/index.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const entry = pathToFileURL(join(root, 'dist', 'index.js')).href;

function run(body: string): Promise<{ status: number | null; out: string }> {
  const script = `const { ManualClock, TimerWheel } = await import(${JSON.stringify(entry)});\n${body}`;
  return runNodeScript(script);
}

describe('sleep() and the life of the process', () => {
  it('keeps the process alive on an unref wheel until it resolves', async () => {
    const { status, out } = await run(`
      const timers = new TimerWheel({ unref: true });
      await timers.sleep(300);
      console.log('woke');
    `);
    expect(status).toBe(0);
    expect(out).toBe('woke');
  });

  it('with { ref: false } lets the process end, like Node (top-level await left unsettled: 13)', async () => {
    const { status, out } = await run(`
      const timers = new TimerWheel({ unref: true });
      await timers.sleep(300, { ref: false });
      console.log('woke');
    `);
    expect(status).toBe(13);
    expect(out).toBe('');
  });

  it('on a ManualClock holds nothing, unref or not: no native timer would ever end it', async () => {
    for (const unref of [false, true]) {
      const { status, out } = await run(`
        const timers = new TimerWheel({ clock: new ManualClock(), unref: ${unref} });
        void timers.sleep(1000);
        void timers.sleep(1000, { ref: true });
        process.on('exit', () => console.log('ended'));
      `);
      expect({ unref, status, out }).toEqual({ unref, status: 0, out: 'ended' });
    }
  });

  it('holds nothing once the sleep is over or aborted', async () => {
    const { status, out } = await run(`
      const timers = new TimerWheel({ unref: true });
      await timers.sleep(50);
      const controller = new AbortController();
      const aborted = timers.sleep(60_000, { signal: controller.signal }).catch((e) => e.name);
      controller.abort();
      console.log(await aborted);
      timers.setTimeout(() => console.log('never'), 60_000);
      const started = Date.now();
      process.on('exit', () => console.log(Date.now() - started < 5000 ? 'ended' : 'held'));
    `);
    expect(status).toBe(0);
    expect(out).toBe('AbortError\nended');
  });
});
