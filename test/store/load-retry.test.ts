/**
 * A load whose hand-over fails (a log read error) is retried by the horizon on the
 * next tick. The retry must hand the message over.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import type { MessageState } from '../../src/queue/message.js';
import { FileStore } from '../../src/store/file/file-store.js';

const T0 = Date.UTC(2026, 10, 22, 12, 0, 0);
const scratch = mkdtempSync(join(tmpdir(), 'tickwheel-load-retry-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function message(id: string, deliverAt: number): MessageState {
  return {
    id,
    topic: 't',
    deliverAt,
    attempts: 0,
    maxAttempts: 3,
    backoff: undefined,
    payloadKind: 1,
    payload: Buffer.from(id),
    ref: 0,
  };
}

it('hands a message over on the retry of a load whose log read failed', async () => {
  const store = await FileStore.open({ dir: join(scratch, 'a'), fsync: 'never', windowMs: 500 });
  try {
    await store.recover(T0 + 1000, () => undefined);
    await store.add(message('m', T0 + 10_000), false);
    // One failing read of the log (EIO), as a flaky disk or EMFILE would give.
    const log = (store as unknown as { log: { readMany: (...a: unknown[]) => unknown } }).log;
    const readMany = log.readMany.bind(log);
    log.readMany = () => {
      log.readMany = readMany;
      return Promise.reject(Object.assign(new Error('EIO: i/o error, read'), { code: 'EIO' }));
    };
    const handed: string[] = [];
    await expect(store.loadUntil(T0 + 20_000, (m) => handed.push(m.id))).rejects.toThrow('EIO');
    expect(handed).toEqual([]);
    // The horizon retries on its next tick (horizon.ts: "hands it over on the next tick").
    await store.loadUntil(T0 + 20_000, (m) => handed.push(m.id));
    expect(handed).toEqual(['m']);
  } finally {
    await store.close();
  }
});
