/**
 * Loads of the horizon that meet a fault or a checkpoint.
 *
 * A load whose log read fails is retried by the horizon on its next tick: the retry must hand
 * its messages over.
 *
 * A checkpoint reads the frontier before it syncs the index and lists its files. A load
 * that runs meanwhile (during the log's fsync) takes index files and deletes them (or, when it
 * carried entries, marks them to go after this very checkpoint), so the checkpoint says
 * "frontier F0" while entries due at or after F0 are in no index file it lists. A restart with
 * a nearer horizon (smaller horizonMs, clock set back; replay.ts says the index is rebuilt
 * then, when checkpoint.frontier is beyond the new frontier) trusts that index and never
 * delivers the message.
 */
import { cpSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import type { MessageState } from '../../src/queue/message.js';
import { FileStore } from '../../src/store/file/file-store.js';
import { useTempDirs } from '../support/temp-dir.js';

const tempDir = useTempDirs('load-faults');

const T0 = Date.UTC(2026, 10, 22, 12, 0, 0);
const scratch = tempDir();

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

const open = (dir: string) =>
  FileStore.open({ dir, fsync: 'never', windowMs: 500, snapshotBytes: Infinity });

for (const carried of [false, true]) {
  it(`keeps a message a load took during a checkpoint (${carried ? 'carried file' : 'plain file'})`, async () => {
    const dir = join(scratch, carried ? 'c' : 'p');
    const store = await open(dir);
    await store.recover(T0 + 1000, () => undefined); // frontier F0 = T0 + 1000
    await store.add(message('m', T0 + 5000), false);
    // carried: a second message far in the same level file, so the file carries it on.
    if (carried) await store.add(message('far', T0 + 7900), false);
    await store.checkpoint('never');

    // The next checkpoint's log fsync takes a while; a load runs meanwhile.
    const log = (store as unknown as { log: { syncAll: () => Promise<void> } }).log;
    const syncAll = log.syncAll.bind(log);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    log.syncAll = async () => {
      await gate;
      return syncAll();
    };
    const checkpoint = store.checkpoint('never');
    const handed: string[] = [];
    await store.loadUntil(T0 + 6000, (m) => handed.push(m.id)); // frontier F1 = T0 + 6000
    expect(handed).toEqual(['m']);
    release();
    await checkpoint;

    // Crash (the files as they are), then a restart with a nearer horizon: T0 + 3000.
    const image = join(scratch, `${carried ? 'c' : 'p'}-image`);
    cpSync(dir, image, { recursive: true });
    rmSync(join(image, 'LOCK'), { force: true });
    await store.close();
    const again = await open(image);
    try {
      const after: string[] = [];
      await again.recover(T0 + 3000, (m) => after.push(m.id));
      await again.loadUntil(T0 + 10_000, (m) => after.push(m.id));
      // m (due T0 + 5000) was never acknowledged: it must come again after the crash.
      expect(after).toContain('m');
    } finally {
      await again.close();
    }
  });
}

it('hands a message over on the retry of a load whose log read failed', async () => {
  const store = await FileStore.open({
    dir: join(scratch, 'retry'),
    fsync: 'never',
    windowMs: 500,
  });
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
