/**
 * The backends the conformance suite runs on: each opens a fresh `Queue` (a new memory store,
 * a new data directory, a new queue name on one standalone Valkey). A backend whose server is
 * not installed is left out of the list.
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { DelayQueue } from '../../src/delay-queue.js';
import type { Queue } from '../../src/queue/api.js';
import { MemoryStore } from '../../src/store/memory-store.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { installed, startServer } from '../../scripts/valkey.mjs';

export interface Backend {
  readonly name: 'memory' | 'file' | 'valkey';
  /** A new, empty queue; closed (and its files removed) by closeAll(). */
  open(): Promise<Queue>;
}

const hasValkey = installed('valkey-server') as boolean;
let valkey: { url: string; stop(): Promise<void> } | undefined;
const opened: Queue[] = [];
const dirs: string[] = [];
let queues = 0;

/** Starts what the backends need (a Valkey) before the file's tests, and stops it after. */
export function useBackends(): void {
  beforeAll(async () => {
    if (hasValkey) valkey = await startServer({ binary: 'valkey-server' });
  }, 30_000);
  afterAll(async () => {
    await closeAll();
    await valkey?.stop();
  });
}

export async function closeAll(): Promise<void> {
  for (const queue of opened.splice(0)) await queue.close().catch(() => {});
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
}

function track(queue: Queue): Queue {
  opened.push(queue);
  return queue;
}

const all: Backend[] = [
  {
    name: 'memory',
    open: async () => track(await DelayQueue.open({ store: new MemoryStore() })),
  },
  {
    name: 'file',
    open: async () => {
      const dir = mkdtempSync(join(tmpdir(), 'tickwheel-conformance-'));
      dirs.push(dir);
      return track(await DelayQueue.open({ dir }));
    },
  },
  {
    name: 'valkey',
    open: async () =>
      track(
        await DelayQueue.open({
          redis: valkey!.url,
          queue: `conformance-${process.pid}-${queues++}`,
          partitions: 2,
          leaseMs: 1_000,
          durability: 'async',
          onError: () => {},
        }),
      ),
  },
];

export const backends: Backend[] = all.filter((backend) => backend.name !== 'valkey' || hasValkey);
