/**
 * One throwaway PostgreSQL per test file (scripts/postgres.mjs), a driver per test on a queue of
 * its own, and the records the tests schedule (src/partitioned/record.ts, as the engine writes them).
 */

import { afterAll, afterEach, beforeAll } from 'vitest';
import pg from 'pg';
import { encodeRecord } from '../../src/partitioned/record.js';
import { PostgresDriver, type PostgresDriverOptions } from '../../src/postgres/driver.js';
import type { Owner, ToSchedule } from '../../src/partitioned/driver.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { endPool, startPostgres } from '../../scripts/postgres.mjs';

export const WINDOW_MS = 30_000;
export const PARTITIONS = 4;

export interface PostgresServer {
  url: string;
  pid: number;
  stop(): Promise<void>;
}

/** A server for the file; `open()` a driver on a fresh queue (closed after each test). */
export function withPostgres() {
  const state: { server?: PostgresServer; pool?: pg.Pool } = {};
  const opened: PostgresDriver[] = [];
  let queues = 0;
  beforeAll(async () => {
    state.server = (await startPostgres()) as PostgresServer;
    state.pool = new pg.Pool({ connectionString: state.server.url, max: 4 });
  }, 60_000);
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((driver) => driver.close()));
  });
  afterAll(async () => {
    if (state.pool) await endPool(state.pool);
    await state.server?.stop();
  });
  return {
    get url(): string {
      return state.server!.url;
    },
    /** A pool of the test's own, for looking at tables. */
    get pool(): pg.Pool {
      return state.pool!;
    },
    async open(
      queue = `q${++queues}`,
      partitions = PARTITIONS,
      options: Partial<PostgresDriverOptions> = {},
    ): Promise<PostgresDriver> {
      const url = state.server!.url;
      const driver = await PostgresDriver.open({ postgres: url, queue, poolSize: 4, ...options });
      opened.push(driver);
      await driver.config(partitions, WINDOW_MS);
      return driver;
    },
  };
}

export function bucketOf(id: string): number {
  let h = 0;
  for (let i = 0; i < id.length; i++) h = (h * 31 + id.charCodeAt(i)) % 1024;
  return h;
}

/**
 * Two hours ahead, 12,345 ms into its window: past any horizon the tests load, and at the first
 * level of window segments (segment number = window; segments.sql, window_seg).
 */
export const FAR = Math.floor(Date.now() / WINDOW_MS) * WINDOW_MS + 7_200_000 + 12_345;

export function windowOf(deliverAt: number): number {
  return Math.floor(deliverAt / WINDOW_MS);
}

/** The segment the store puts a window in now, and the suffix of its table (segments.sql). */
export async function windowSegment(
  pool: pg.Pool,
  schema: string,
  window: number,
): Promise<{ segment: number; span: string }> {
  const q = `"${schema}"`;
  const { rows } = await pool.query(
    `SELECT s AS segment, (${q}.span_of(s)).suffix AS span
     FROM (SELECT ${q}.window_seg($1::bigint, ${q}.now_window()) AS s) x`,
    [window],
  );
  return { segment: Number(rows[0].segment), span: String(rows[0].span) };
}

export interface MessageSpec {
  id: string;
  deliverAt: number;
  topic?: string;
  maxAttempts?: number;
  payload?: string;
}

/** A message with an id, as the engine schedules it. */
export function message(spec: MessageSpec): ToSchedule & { kind: 'message' } {
  const topic = spec.topic ?? 'invoice';
  const bucket = bucketOf(spec.id);
  const record = encodeRecord(
    {
      id: spec.id,
      topic,
      maxAttempts: spec.maxAttempts ?? 3,
      backoff: undefined,
      payloadKind: 0,
      payload: spec.payload ?? `payload of ${spec.id}`,
    },
    bucket,
  );
  const window = windowOf(spec.deliverAt);
  return { kind: 'message', id: spec.id, bucket, deliverAt: spec.deliverAt, window, topic, record };
}

let tags = 0;

/** A located record (no id): its tag and due time are in it. */
export function located(deliverAt: number, topic = 'invoice', payload = 'x', maxAttempts = 3) {
  const tag = `t${String(++tags).padStart(7, '0')}`;
  const record = encodeRecord(
    { id: '', topic, maxAttempts, backoff: undefined, payloadKind: 0, payload },
    0,
    { tag, deliverAt },
  );
  return { tag, deliverAt, record };
}

/** A run of located records of one window. */
export function run(records: Array<ReturnType<typeof located>>, topic = 'invoice') {
  const dues = records.map((r) => r.deliverAt);
  return {
    kind: 'run' as const,
    window: windowOf(dues[0]),
    earliest: Math.min(...dues),
    latest: Math.max(...dues),
    topic,
    records: records.map((r) => r.record),
  };
}

export const at = (partition: number, id: string) => ({ partition, id, bucket: bucketOf(id) });

/** Acquires partition `p`'s lease for `node`: its Owner. */
export async function own(driver: PostgresDriver, p: number, node = 'node-a'): Promise<Owner> {
  const lease = await driver.lease(p, 'acquire', { node, epoch: 0 }, 30_000);
  if (!lease.granted) throw new Error(`partition ${p} not granted to ${node}`);
  return { node, epoch: lease.epoch };
}
