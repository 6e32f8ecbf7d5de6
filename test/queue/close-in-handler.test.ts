/**
 * queue.close() called from inside a consume() handler, in a plain `node` process against the
 * built package: it ends cleanly. The close resolves once the handler that called it (and the
 * others running) are done and their acks settled; nothing is reported (no warning, no error of
 * a closed log), the process exits 0, and a reopen of the data directory finds the handled
 * messages acked and the rest still pending.
 */

import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { useTempDirs } from '../support/temp-dir.js';

const tempDir = useTempDirs('close-in-handler');

const dist = new URL('../../dist/delay-queue.js', import.meta.url).href;

function run(script: string, dir: string) {
  return spawnSync(process.execPath, ['--input-type=module', '-e', script, dir], {
    encoding: 'utf8',
    timeout: 60_000,
  });
}

describe('queue.close() from inside a handler', () => {
  it('ends cleanly: handled messages acked, the rest pending, nothing reported', () => {
    const dir = tempDir();
    const first = run(
      `
      const { DelayQueue } = await import(${JSON.stringify(dist)});
      const reported = [];
      process.on('warning', (w) => reported.push(w.name + ': ' + w.message));
      process.on('unhandledRejection', (e) => reported.push('unhandled: ' + String(e)));
      const queue = await DelayQueue.open({ dir: process.argv[1] });
      await queue.scheduleMany(Array.from({ length: 200 }, (_, i) => ({ topic: 't', payload: i, id: 'm' + i })));
      let handled = 0;
      let closing;
      queue.consume('t', async (m) => {
        handled++;
        if (m.payload === 20) closing = queue.close();
        await new Promise((r) => setImmediate(r));
      }, { concurrency: 8 });
      while (closing === undefined) await new Promise((r) => setTimeout(r, 5));
      await closing;
      console.log(JSON.stringify({ handled, reported }));
      `,
      dir,
    );
    expect(first.status, first.stderr).toBe(0);
    expect(first.stderr).toBe('');
    const { handled, reported } = JSON.parse(first.stdout) as {
      handled: number;
      reported: string[];
    };
    expect(reported).toEqual([]);
    expect(handled).toBeGreaterThanOrEqual(21);

    const second = run(
      `
      const { DelayQueue } = await import(${JSON.stringify(dist)});
      const queue = await DelayQueue.open({ dir: process.argv[1] });
      const statuses = {};
      for (let i = 0; i < 200; i++) {
        const status = (await queue.get('m' + i))?.status ?? 'finished';
        statuses[status] = (statuses[status] ?? 0) + 1;
      }
      console.log(JSON.stringify(statuses));
      await queue.close();
      `,
      dir,
    );
    expect(second.status, second.stderr).toBe(0);
    // Every handled message acked (finished: not pending, not redelivered), the others waiting.
    expect(JSON.parse(second.stdout)).toEqual({ finished: handled, ready: 200 - handled });
  });
});
