/**
 * A data directory the system refuses to open (one of its files made a directory): the open
 * fails with ERR_TICKWHEEL_IO naming the directory, not a bare EISDIR, and the directory opens
 * again once it is put right. A log whose format.json is gone is refused, saying how to put it back.
 */

import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DelayQueue } from '../../src/delay-queue.js';
import type { QueueFault } from '../../src/queue/faults.js';
import { useTempDirs } from '../support/temp-dir.js';

const tempDir = useTempDirs('open-errors');

/** A data directory holding message 'kept', whose file `name` is then made a directory. */
async function withDirectoryFor(name: string): Promise<string> {
  const dir = tempDir();
  const queue = await DelayQueue.open({ dir });
  await queue.schedule({ topic: 't', id: 'kept', payload: 1, delayMs: 60_000 });
  await queue.close();
  rmSync(join(dir, name));
  mkdirSync(join(dir, name, 'inside'), { recursive: true });
  return dir;
}

/** Opens `dir` and finds 'kept' there. */
async function expectKept(dir: string): Promise<void> {
  const again = await DelayQueue.open({ dir });
  expect(await again.get('kept')).toMatchObject({ status: 'scheduled' });
  await again.close();
}

describe('opening a data directory the system refuses', () => {
  it.each(['LOCK', 'format.json'])(
    '%s made a directory: ERR_TICKWHEEL_IO naming it',
    async (name) => {
      const dir = await withDirectoryFor(name);

      const refused = DelayQueue.open({ dir });
      await expect(refused).rejects.toMatchObject({
        code: 'ERR_TICKWHEEL_IO',
        message: expect.stringContaining(`opening the data directory ${dir} failed: EISDIR`),
      });

      rmSync(join(dir, name), { recursive: true });
      if (name === 'format.json') {
        await expect(DelayQueue.open({ dir })).rejects.toMatchObject({
          code: 'ERR_TICKWHEEL_FORMAT',
          message: expect.stringContaining('or format.json was deleted. If tickwheel'),
        });
        writeFileSync(join(dir, name), '{"format":2}');
      }
      await expectKept(dir);
    },
  );

  it('checkpoint.json made a directory: the open fails, and no fault says it is retried', async () => {
    const dir = await withDirectoryFor('checkpoint.json');
    const faults: QueueFault[] = [];
    await expect(DelayQueue.open({ dir, onFault: (f) => faults.push(f) })).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_IO',
      message: expect.stringContaining(`recovering the data directory ${dir} failed: EISDIR`),
    });
    expect(faults.map((f) => f.message)).toEqual([]);
    rmSync(join(dir, 'checkpoint.json'), { recursive: true });
    await expectKept(dir);
  });

  it('the only log segment deleted: refused as missing, nothing made on disk; repair drops its messages', async () => {
    const dir = tempDir();
    const queue = await DelayQueue.open({ dir });
    for (const id of ['a', 'b'])
      await queue.schedule({ topic: 't', id, payload: 1, delayMs: 60_000 });
    await queue.close();
    rmSync(join(dir, 'log', '0000000001.seg'));
    for (let i = 0; i < 2; i++) {
      await expect(DelayQueue.open({ dir })).rejects.toMatchObject({
        code: 'ERR_TICKWHEEL_CORRUPT',
        message: expect.stringContaining('log segment 1 (bytes 0 to'),
      });
      await expect(DelayQueue.open({ dir })).rejects.toThrow(/is missing; 2 live messages/);
      expect(readdirSync(join(dir, 'log'))).toEqual([]);
    }
    const repaired = await DelayQueue.open({ dir, repair: true });
    expect(await repaired.get('a')).toBeUndefined();
    await repaired.schedule({ topic: 't', id: 'c', payload: 1, delayMs: 60_000 });
    await repaired.close();
    const again = await DelayQueue.open({ dir });
    expect(await again.get('c')).toMatchObject({ status: 'scheduled' });
    await again.close();
  });
});
