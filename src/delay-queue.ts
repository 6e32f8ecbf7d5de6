/**
 * `tickwheel/queue`: the durable delay queue, embedded in your process.
 *
 *   const queue = await DelayQueue.open({ dir: './data' });
 *   await queue.schedule({ topic: 'emails', payload: { to: 'a@b.c' }, delayMs: 60_000 });
 *   queue.consume('emails', async (message) => send(message.payload));
 *
 * The composition root of the queue: it joins the engine (src/queue, which knows storage only
 * through its Store interface) to a store (src/store: the file store, or the memory store).
 * It lives here, above both, because src/queue must never import src/store.
 */

import { QueueEngine, type DelayQueueOptions } from './queue/index.js';
import type { Store } from './queue/store.js';
import { FileStore, type FileStoreOptions } from './store/file/file-store.js';
import { MemoryStore } from './store/memory-store.js';

export interface DelayQueueOpenOptions
  extends DelayQueueOptions, Partial<Omit<FileStoreOptions, 'dir' | 'logIo'>> {
  /** Data directory of the file store. Required unless `store` is given. */
  dir?: string;
  /** Another store: `new MemoryStore()` for a queue without durability. */
  store?: Store;
}

export class DelayQueue extends QueueEngine {
  /** Opens (and recovers) a queue on a data directory, or on the store given. */
  static async open(options: DelayQueueOpenOptions): Promise<DelayQueue> {
    const store =
      options.store ??
      (await FileStore.open({
        dir: options.dir as string,
        ...(options.fsync === undefined ? {} : { fsync: options.fsync }),
        ...(options.segmentBytes === undefined ? {} : { segmentBytes: options.segmentBytes }),
        ...(options.windowMs === undefined ? {} : { windowMs: options.windowMs }),
        ...(options.checkpointIntervalMs === undefined
          ? {}
          : { checkpointIntervalMs: options.checkpointIntervalMs }),
        ...(options.snapshotBytes === undefined ? {} : { snapshotBytes: options.snapshotBytes }),
        ...(options.repair === undefined ? {} : { repair: options.repair }),
      }));
    try {
      const queue = new DelayQueue(store, options);
      await queue.start();
      return queue;
    } catch (err) {
      await store.close().catch(() => undefined);
      throw err;
    }
  }
}

export { FileStore, MemoryStore, type FileStoreOptions };
export * from './queue/index.js';
export type { FsyncPolicy } from './store/log/index.js';
