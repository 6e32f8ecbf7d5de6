/**
 * What a test opens (queues, receivers, servers) is closed when the test has finished, the last
 * opened first, so that no test leaves a port, a timer or a directory in use for the next one.
 */

import { afterEach } from 'vitest';

export interface Closable {
  close(): Promise<void>;
}

/**
 * Call once at the top of a test file (after useTempDirs, so that directories are removed after
 * what uses them is closed); returns `track`, which resolves to what it is given and closes that
 * after the test.
 */
export function useClosing(): <T extends Closable>(thing: Promise<T>) => Promise<T> {
  const opened: Closable[] = [];
  afterEach(async () => {
    while (opened.length > 0) await opened.pop()!.close();
  });
  return async (thing) => {
    const value = await thing;
    opened.push(value);
    return value;
  };
}
