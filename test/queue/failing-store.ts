/** A store whose writes reach the disk and are then reported failed (tests of outcomes). */

import type { Store } from '../../src/queue/store.js';
import type { FileStore } from '../../src/store/file/file-store.js';

export type Written = 'add' | 'writeTopicSettings' | 'writeSchedules';

/**
 * A file store whose next `failing` write is carried out in full, then reported failed with
 * EIO: the write is on disk, the caller is told it failed.
 */
export function failingAfterWrite(store: FileStore) {
  const fault = { failing: undefined as Written | undefined };
  const wrapped = new Proxy(store, {
    get(target, property) {
      const value = Reflect.get(target, property) as unknown;
      if (typeof value !== 'function') return value;
      const method = (value as (...args: unknown[]) => unknown).bind(target);
      if (property !== fault.failing) return method;
      return async (...args: unknown[]) => {
        await method(...args);
        fault.failing = undefined;
        throw Object.assign(new Error('EIO: i/o error, fsync'), { code: 'EIO' });
      };
    },
  });
  return { store: wrapped as Store, fault };
}
