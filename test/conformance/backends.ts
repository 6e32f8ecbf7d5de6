/**
 * The backends the conformance suite runs on: each opens a fresh `Queue` (a new memory store,
 * a new data directory, a new queue name on a standalone Valkey, on a Valkey Cluster of three
 * primaries, on a Redis 7 primary with a replica and durability 'replicated', on PostgreSQL 15).
 * A backend whose server is not installed is left out of the list; the servers start once per
 * test file, on the first open() that needs them.
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { DelayQueue } from '../../src/delay-queue.js';
import type { Queue } from '../../src/queue/api.js';
import type { QueueOptions } from '../../src/queue/types.js';
import { MemoryStore } from '../../src/store/memory-store.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { installed, startCluster, startReplicated, startServer } from '../../scripts/valkey.mjs';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { postgresInstalled, startPostgres } from '../../scripts/postgres.mjs';

export type BackendName = 'memory' | 'file' | 'valkey' | 'valkey-cluster' | 'redis7' | 'postgres';

export interface Backend {
  readonly name: BackendName;
  /** A new, empty queue, with `options` too; closed (and its files removed) by closeAll(). */
  open(options?: QueueOptions): Promise<Queue>;
}

interface Server {
  urls: string[];
  stop(): Promise<void>;
}

const hasValkey = installed('valkey-server') as boolean;
const hasRedis = installed('redis-server') as boolean;
const hasPostgres = postgresInstalled() as boolean;
/** Servers started, by backend: each once per test file, when first needed. */
const servers = new Map<BackendName, Promise<Server>>();
const opened: Queue[] = [];
const dirs: string[] = [];
let queues = 0;

/** Stops the servers the file's tests started, after them. */
export function useBackends(): void {
  afterAll(async () => {
    await closeAll();
    for (const server of servers.values()) await (await server).stop();
    servers.clear();
  }, 60_000);
}

function serverFor(name: BackendName): Promise<Server> {
  let server = servers.get(name);
  if (server === undefined) {
    server = startFor(name);
    servers.set(name, server);
  }
  return server;
}

async function startFor(name: BackendName): Promise<Server> {
  if (name === 'postgres') {
    const server = (await startPostgres()) as { url: string; stop(): Promise<void> };
    return { urls: [server.url], stop: () => server.stop() };
  }
  if (name === 'valkey-cluster') {
    const cluster = await startCluster({ primaries: 3, replicas: 0 });
    return { urls: cluster.urls, stop: () => cluster.stop() };
  }
  if (name === 'redis7') {
    const set = await startReplicated({ binary: 'redis-server', replicas: 1 });
    return { urls: [set.primary.url], stop: () => set.stop() };
  }
  const server = await startServer({ binary: 'valkey-server' });
  return { urls: [server.url], stop: () => server.stop() };
}

/** A queue on the server of `name`, under a queue name of its own. */
async function openShared(name: BackendName, options: QueueOptions = {}): Promise<Queue> {
  const { urls } = await serverFor(name);
  return track(
    await DelayQueue.open({
      ...options,
      redis: urls.length === 1 ? urls[0] : urls,
      queue: `conformance-${process.pid}-${queues++}`,
      partitions: 4,
      windowMs: 1_000,
      horizonMs: 2_000,
      leaseMs: 1_000,
      durability: name === 'redis7' ? 'replicated' : 'async',
      onError: () => {},
    }),
  );
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
    open: async (options) => track(await DelayQueue.open({ ...options, store: new MemoryStore() })),
  },
  {
    name: 'file',
    open: async (options) => {
      const dir = mkdtempSync(join(tmpdir(), 'tickwheel-conformance-'));
      dirs.push(dir);
      return track(await DelayQueue.open({ ...options, dir }));
    },
  },
  { name: 'valkey', open: (options) => openShared('valkey', options) },
  { name: 'valkey-cluster', open: (options) => openShared('valkey-cluster', options) },
  { name: 'redis7', open: (options) => openShared('redis7', options) },
  { name: 'postgres', open: (options) => openPostgres(options) },
];

/** A queue on the file's PostgreSQL, under a queue name of its own. */
async function openPostgres(options: QueueOptions = {}): Promise<Queue> {
  const { urls } = await serverFor('postgres');
  return track(
    await DelayQueue.open({
      ...options,
      postgres: urls[0],
      queue: `conformance-${process.pid}-${queues++}`,
      partitions: 4,
      windowMs: 1_000,
      horizonMs: 2_000,
      leaseMs: 1_000,
      poolSize: 4,
      onError: () => {},
    }),
  );
}

export const backends: Backend[] = all.filter(
  (backend) =>
    backend.name === 'memory' ||
    backend.name === 'file' ||
    (backend.name === 'postgres' ? hasPostgres : backend.name === 'redis7' ? hasRedis : hasValkey),
);

/** The error code of what `call` throws or rejects with; 'ok' when it succeeds. */
export async function codeOf(call: () => unknown): Promise<string> {
  try {
    await call();
    return 'ok';
  } catch (err) {
    return (err as { code?: string }).code ?? `uncoded ${(err as Error).name}`;
  }
}
