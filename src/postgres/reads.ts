/**
 * What PostgresDriver reads without changing anything (counts, segments, windows, dead
 * letters, lease holders, recurring schedules' records), and how every call of it is made:
 * one statement on the pool, its errors named (pg.ts).
 */

import { setTimeout as sleep } from 'node:timers/promises';
import { WINDOW_LEVEL_STRIDE, type TopicFields } from '../partitioned/driver.js';
import { quoteIdent } from './install.js';
import { type PgSession, named } from './pg.js';

export const num = (value: unknown): number => Number(value);

/**
 * PostgreSQL ended the statement's transaction to break a deadlock or a serialization conflict
 * (SQLSTATE 40P01, 40001): nothing of it took effect. Two calls making the same span's table
 * while appending to another can deadlock on the parent table's locks (segments.sql).
 */
const ABORTED = new Set(['40P01', '40001']);
/** Tries of one statement whose transaction PostgreSQL ended so. */
const TRIES = 4;

/**
 * The last statement of each session PostgreSQL refused for want of disk, memory or connections
 * (SQLSTATE class 53), and when (Date.now()): a server that answers `SELECT 1` may still refuse
 * every write (resourcesShort()).
 */
const shortages = new WeakMap<PgSession, { at: number; message: string }>();

/**
 * One statement on its own (autocommit) session, made again when PostgreSQL aborted it to
 * break a deadlock: it is atomic, so a try that failed so changed nothing. Errors named (pg.ts).
 */
export async function runAgainIfAborted(
  session: PgSession,
  what: string,
  text: string,
  values: unknown[],
) {
  for (let tries = 1; ; tries++) {
    try {
      return (await session.query(text, values)).rows;
    } catch (err) {
      const code = (err as { code?: unknown } | null)?.code;
      if (tries >= TRIES || typeof code !== 'string' || !ABORTED.has(code)) {
        const error = named(err, what);
        if (typeof code === 'string' && code.startsWith('53')) {
          shortages.set(session, { at: Date.now(), message: error.message });
        }
        throw error;
      }
      await sleep(Math.random() * 20 * tries);
    }
  }
}

export abstract class PostgresReads {
  /** The queue's schema, which names its channel too. */
  readonly schema: string;
  /** The schema as an identifier. */
  protected readonly q: string;

  protected constructor(
    protected readonly session: PgSession,
    schema: string,
  ) {
    this.schema = schema;
    this.q = quoteIdent(schema);
  }

  /** What PostgreSQL said when it last refused a statement of the pool for want of resources. */
  protected resourcesShort(freshMs: number): string | undefined {
    const short = shortages.get(this.session);
    return short !== undefined && Date.now() - short.at <= freshMs ? short.message : undefined;
  }

  protected call(what: string, text: string, values: unknown[]) {
    return runAgainIfAborted(this.session, what, text, values);
  }

  /** The one row of a function's answer. */
  protected async one(what: string, text: string, values: unknown[]) {
    const rows = await this.call(what, text, values);
    return rows[0] ?? {};
  }

  /** A function of the queue's schema. */
  protected fn(name: string): string {
    return `${this.q}.${name}`;
  }

  async topicFields(kind: TopicFields) {
    const rows = await this.call(
      'reading topic fields',
      `SELECT field, value FROM ${this.q}.topic_fields WHERE kind = $1`,
      [kind],
    );
    const fields: Record<string, string> = {};
    for (const row of rows) fields[String(row.field)] = String(row.value);
    return { where: `PostgreSQL table ${this.schema}.topic_fields (${kind})`, fields };
  }

  async leaseHolders() {
    const rows = await this.call(
      'reading lease holders',
      `SELECT owner, until FROM ${this.q}.leases ORDER BY part`,
      [],
    );
    return rows.map((row) => {
      const owner = String(row.owner);
      return { owner, until: owner === '' ? 0 : num(row.until) };
    });
  }

  async nearSegments(partition: number): Promise<string[]> {
    const sql = `SELECT ${this.fn('seg_name')}(seg) AS name FROM ${this.fn('live')}($1::int) WHERE seg < 0 ORDER BY seg DESC`;
    return (await this.call('reading near segments', sql, [partition])).map((r) => String(r.name));
  }

  async windows(partition: number, from: number, before: number, limit?: number) {
    // Every level's segments of the first `limit` windows (a window's segment, segments.sql).
    const sql =
      `WITH w AS (SELECT seg, seg % ${WINDOW_LEVEL_STRIDE} AS win FROM ${this.fn('live')}($1::int) ` +
      `WHERE seg >= 0) SELECT seg FROM w WHERE win IN (SELECT DISTINCT win FROM w ` +
      `WHERE win >= $2::float8 AND win < $3::float8 ORDER BY win LIMIT $4::bigint) ORDER BY win, seg`;
    const lo = Number.isFinite(from) ? from : 0;
    const hi = Number.isFinite(before) ? before : Number.MAX_SAFE_INTEGER;
    const rows = await this.call('reading windows', sql, [partition, lo, hi, limit ?? null]);
    return rows.map((row) => num(row.seg));
  }

  async earliestVisibility(partition: number): Promise<number> {
    const sql = `SELECT min(at) AS at FROM ${this.q}.states WHERE part = $1 AND status = 'I'`;
    const row = await this.one('reading visibility deadlines', sql, [partition]);
    return row.at === null || row.at === undefined ? Infinity : num(row.at);
  }

  /**
   * One statement: a probe of the ready index a partition, never a count of a backlog. Messages
   * fired ahead count too: a take of them tells when they are due.
   */
  async readyPartitions(topic: string, partitions: number): Promise<number[]> {
    const sql =
      `SELECT p FROM generate_series(0, $2::int - 1) p WHERE EXISTS (SELECT 1 FROM ` +
      `${this.q}.states s WHERE s.part = p AND s.topic = $1 AND s.status = 'R') ORDER BY p`;
    const rows = await this.call('finding ready messages', sql, [topic, partitions]);
    return rows.map((row) => num(row.p));
  }

  async counts(partition: number): Promise<Record<string, number>> {
    const sql =
      `SELECT topic || '|' || status::text AS field, sum(n) AS n FROM ${this.q}.counts ` +
      `WHERE part = $1 GROUP BY topic, status HAVING sum(n) <> 0`;
    const counts: Record<string, number> = {};
    for (const row of await this.call('reading counts', sql, [partition])) {
      counts[String(row.field)] = num(row.n);
    }
    return counts;
  }

  async topicCounts(partition: number, topic: string): Promise<Record<string, number>> {
    const sql =
      `SELECT status::text AS status, sum(n) AS n FROM ${this.q}.counts ` +
      `WHERE part = $1 AND topic = $2 GROUP BY status HAVING sum(n) <> 0`;
    const counts: Record<string, number> = {};
    for (const row of await this.call('reading counts', sql, [partition, topic])) {
      counts[String(row.status)] = num(row.n);
    }
    return counts;
  }

  async segmentSizes(partition: number): Promise<Record<string, number>> {
    const sql = `SELECT ${this.fn('seg_name')}(seg) AS name, live FROM ${this.fn('live')}($1::int)`;
    const sizes: Record<string, number> = {};
    for (const row of await this.call('reading segments', sql, [partition])) {
      sizes[String(row.name)] = num(row.live);
    }
    return sizes;
  }

  async loadedUntil(partition: number): Promise<number> {
    const sql = `SELECT loaded_until FROM ${this.q}.horizons WHERE part = $1`;
    return num((await this.one('reading loadedUntil', sql, [partition])).loaded_until ?? 0);
  }

  async dead(partition: number, topic: string, limit: number) {
    const sql =
      `SELECT id, at FROM ${this.q}.states WHERE part = $1 AND topic = $2 AND status = 'D' ` +
      `ORDER BY at LIMIT $3`;
    const rows = await this.call('reading dead letters', sql, [partition, topic, limit]);
    return rows.map((row) => ({ id: String(row.id), died: num(row.at) }));
  }

  async reasons(partition: number, ids: readonly string[]) {
    const sql =
      `SELECT r.reason FROM unnest($2::text[]) WITH ORDINALITY AS x(id, k) ` +
      `LEFT JOIN ${this.q}.reasons r ON r.part = $1 AND r.id = x.id ORDER BY x.k`;
    const rows = await this.call('reading reasons', sql, [partition, ids]);
    return rows.map((row) => (row.reason === null ? undefined : String(row.reason)));
  }

  async schedRecord(name: string): Promise<string | undefined> {
    const sql = `SELECT version || '|' || record AS v FROM ${this.q}.sched WHERE name = $1`;
    const row = await this.one('reading a recurring schedule', sql, [name]);
    return row.v === undefined ? undefined : String(row.v);
  }

  async schedRecords(): Promise<Record<string, string>> {
    const sql = `SELECT name, version || '|' || record AS v FROM ${this.q}.sched`;
    const records: Record<string, string> = {};
    for (const row of await this.call('reading recurring schedules', sql, [])) {
      records[String(row.name)] = String(row.v);
    }
    return records;
  }

  async schedChanges(): Promise<string | null> {
    const sql = `SELECT value FROM ${this.q}.config WHERE key = 'schedChanges'`;
    const row = await this.one('reading recurring schedule changes', sql, []);
    return row.value === undefined ? null : String(row.value);
  }
}
