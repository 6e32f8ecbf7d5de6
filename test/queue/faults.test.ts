/**
 * Background faults (src/queue/faults.ts): every one reaches the queue's `onFault` with a code,
 * and only when nobody gave one does it become a process warning, with the same code.
 */

import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DelayQueue, MemoryStore } from '../../src/delay-queue.js';
import type { QueueFault } from '../../src/queue/faults.js';
import { startReceiver, type Receiver } from './push-receiver.js';
import { useTempDirs } from '../support/temp-dir.js';
import { useClosing } from '../support/closing.js';
import { waitFor } from '../support/wait-for.js';

const tempDir = useTempDirs('faults');

const track = useClosing();

/** Process warnings while `run` runs. */
async function warningsDuring(run: () => Promise<void>): Promise<Array<Error & { code?: string }>> {
  const warnings: Array<Error & { code?: string }> = [];
  const onWarning = (warning: Error) => warnings.push(warning);
  process.on('warning', onWarning);
  try {
    await run();
    // Node emits a warning on the next tick.
    await new Promise((resolve) => setImmediate(resolve));
  } finally {
    process.off('warning', onWarning);
  }
  return warnings;
}

describe('onFault', () => {
  it('takes the loss of the LOCK file with its code, and no process warning is made', async () => {
    const faults: QueueFault[] = [];
    const dir = tempDir('lock');
    const queue = await DelayQueue.open({ dir, onFault: (fault) => faults.push(fault) });
    const warnings = await warningsDuring(async () => {
      rmSync(join(dir, 'LOCK'));
      await expect(queue.pause('jobs')).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_LOCK_LOST' });
    });
    await queue.close().catch(() => undefined);
    expect(faults.map((fault) => [fault.code, fault.level])).toEqual([
      ['ERR_TICKWHEEL_LOCK_LOST', 'warn'],
    ]);
    expect(faults[0].message).toMatch(/LOCK/);
    expect(warnings).toEqual([]);
  });

  it('without it, the fault is a process warning with the same code', async () => {
    const dir = tempDir('lock-default');
    const queue = await DelayQueue.open({ dir });
    const warnings = await warningsDuring(async () => {
      rmSync(join(dir, 'LOCK'));
      await expect(queue.pause('jobs')).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_LOCK_LOST' });
    });
    await queue.close().catch(() => undefined);
    expect(warnings.map((warning) => warning.code)).toEqual(['ERR_TICKWHEEL_LOCK_LOST']);
  });

  it('one that throws breaks nothing: the fault and what it threw become process warnings', async () => {
    const dir = tempDir('lock-throws');
    const queue = await DelayQueue.open({
      dir,
      onFault: () => {
        throw new Error('logger down');
      },
    });
    const warnings = await warningsDuring(async () => {
      rmSync(join(dir, 'LOCK'));
      await expect(queue.pause('jobs')).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_LOCK_LOST' });
    });
    await queue.close().catch(() => undefined);
    expect(warnings.map((warning) => warning.code)).toEqual([
      'ERR_TICKWHEEL_LOCK_LOST',
      'ERR_TICKWHEEL_LISTENER_FAILED',
    ]);
    expect(warnings[1].message).toMatch(/logger down/);
  });

  it('is refused when it is not a function', async () => {
    await expect(
      DelayQueue.open({ store: new MemoryStore(), onFault: 'log' as never }),
    ).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_INVALID_CALLBACK' });
  });

  it("takes a handler's failure with where it was", async () => {
    const faults: QueueFault[] = [];
    const queue = await track(
      DelayQueue.open({ store: new MemoryStore(), onFault: (fault) => faults.push(fault) }),
    );
    await queue.schedule({ topic: 'jobs', id: 'm1', payload: 1, maxAttempts: 1 });
    queue.consume('jobs', () => {
      throw new Error('handler bug');
    });
    await waitFor(() => faults.length > 0);
    expect(faults[0]).toMatchObject({
      code: 'ERR_TICKWHEEL_HANDLER_FAILED',
      level: 'warn',
      fields: { topic: 'jobs', id: 'm1', attempts: 1 },
    });
    expect(faults[0].message).toMatch(/handler bug/);
  });
});

describe('pushes that fail', () => {
  it('are one fault per run of failures and reason, and one when pushes succeed again', async () => {
    let refuse = true;
    const target: Receiver = await track(startReceiver(() => ({ status: refuse ? 503 : 200 })));
    const faults: QueueFault[] = [];
    const queue = await track(
      DelayQueue.open({
        store: new MemoryStore(),
        push: { allow: ['127.0.0.0/8'] },
        onFault: (fault) => faults.push(fault),
      }),
    );
    await queue.configureTopic('hooks', {
      push: { url: `${target.url}/hook?key=s3cret`, secret: 'a-secret-of-some-length-0123456789' },
    });
    for (let i = 0; i < 5; i++) {
      await queue.schedule({ topic: 'hooks', id: `m${i}`, payload: i, maxAttempts: 1 });
    }
    await waitFor(async () => (await queue.stats()).dead === 5);
    refuse = false;
    await queue.schedule({ topic: 'hooks', id: 'ok', payload: 'ok' });
    await waitFor(() => faults.length === 2);
    expect(faults.map((fault) => [fault.code, fault.level, fault.fields.topic])).toEqual([
      ['ERR_TICKWHEEL_PUSH_FAILED', 'warn', 'hooks'],
      ['TICKWHEEL_PUSH_HEALED', 'info', 'hooks'],
    ]);
    expect(faults[0].message).toMatch(/503/);
    // The target's path and query may hold a secret: only its origin is told.
    expect(JSON.stringify(faults.map(({ error: _error, ...fault }) => fault))).not.toMatch(
      /s3cret/,
    );
  });
});
