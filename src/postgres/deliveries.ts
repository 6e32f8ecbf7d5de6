/**
 * The calls of PostgresDriver on messages handed out (docs/postgres.md): take, ack, nack, and
 * the expiry of those whose visibility ran out, each one statement running one function of
 * sql/deliveries.sql. A message whose record the database no longer has is dropped there and
 * reported here (ERR_TICKWHEEL_DATA_LOST), never passed over silently.
 */

import {
  withRecords,
  type Delivery,
  type Owner,
  type PartitionDriver,
  type Retry,
} from '../partitioned/driver.js';
import { VISIBILITY_REASON } from '../queue/message.js';
import type { PgSession } from './pg.js';
import { PostgresReads, num } from './reads.js';

export abstract class PostgresDeliveries extends PostgresReads {
  protected constructor(
    session: PgSession,
    schema: string,
    protected readonly onError: (err: Error) => void,
  ) {
    super(session, schema);
  }

  /** Tells this node's subscribers of `partition` that messages of `topic` are ready at `at`. */
  protected abstract readyAt(partition: number, topic: string, at: number): void;

  async overdue(
    partition: number,
    upTo: number,
    max: number,
  ): ReturnType<PartitionDriver['overdue']> {
    const sql = `SELECT * FROM ${this.fn('tw_overdue')}($1::int, $2::bigint, $3::int)`;
    const rows = await this.call('tw_overdue', sql, [partition, Math.floor(upTo), max]);
    const kept = this.withRecords(partition, rows, 'in flight');
    // Only lost ones: those behind them instead (the lost rows are gone, so this ends).
    if (kept.length === 0 && rows.length > 0) return this.overdue(partition, upTo, max);
    return kept.map((row) => ({
      id: String(row.id),
      bucket: num(row.bucket),
      attempts: num(row.attempts),
      record: row.record,
      deliverAt: num(row.due),
    }));
  }

  async expire(partition: number, by: Owner, deliveries: readonly Retry[]) {
    const sql =
      `SELECT seq, outcomes FROM ${this.fn('tw_expire')}($1::int, $2, $3::bigint, $4::text[], ` +
      `$5::int[], $6::float8[], $7::bigint[], $8)`;
    const lists = [
      deliveries.map((d) => d.id),
      deliveries.map((d) => d.attempt),
      deliveries.map((d) => d.due),
      deliveries.map((d) => d.window),
    ];
    const row = await this.one('tw_expire', sql, [
      partition,
      by.node,
      by.epoch,
      ...lists,
      VISIBILITY_REASON,
    ]);
    if (row.seq === null || row.seq === undefined) return undefined;
    const outcomes = (row.outcomes as number[]).map((o): 'left' | 'retried' | 'dead' =>
      o === 1 ? 'retried' : o === 2 ? 'dead' : 'left',
    );
    return { seq: num(row.seq), outcomes };
  }

  async take(
    partition: number,
    topic: string,
    max: number,
    visibilityMs: number,
    maxBytes: number,
  ): ReturnType<PartitionDriver['take']> {
    const sql =
      `SELECT * FROM ${this.fn('tw_take')}($1::int, $2, $3::int, $4::bigint, $5::bigint, ` +
      `$6::float8)`;
    const now = Date.now();
    const values = [partition, topic, max, Math.ceil(visibilityMs), Math.floor(maxBytes), now];
    const answer = await this.call('tw_take', sql, values);
    // Last, when the take was short: when the first message left for not being due is.
    const last = answer.at(-1);
    const rows = last !== undefined && last.id === null ? answer.slice(0, -1) : answer;
    if (rows !== answer) this.readyAt(partition, topic, Math.ceil(num(last!.due)));
    const kept = this.withRecords(partition, rows, `ready (topic ${topic})`);
    // Only lost ones: those behind them instead (the lost rows are gone, so this ends).
    if (kept.length === 0 && rows.length > 0) {
      return this.take(partition, topic, max, visibilityMs, maxBytes);
    }
    return kept.map((row) => ({
      id: String(row.id),
      attempts: num(row.attempts),
      deliverAt: num(row.due),
      record: row.record,
    }));
  }

  /** The rows that have their record; each without one (dropped by the call) reported lost. */
  private withRecords(partition: number, rows: Array<Record<string, unknown>>, was: string) {
    type Row = Record<string, unknown> & { id: unknown; record: Buffer | null };
    const named = rows.map((row): Row => ({
      ...row,
      id: row.id,
      record: row.rec as Buffer | null,
    }));
    return withRecords(named, partition, was, 'docs/postgres.md, "Durability"', this.onError);
  }

  /** `durable`: its COMMIT waits for the WAL flush (synchronous_commit); else it does not. */
  async ack(
    partition: number,
    deliveries: readonly Delivery[],
    durable: boolean,
  ): Promise<boolean[]> {
    if (deliveries.length === 0) return [];
    const sql = `SELECT ${this.fn('tw_ack')}($1::int, $2::text[], $3::int[], $4::boolean) AS v`;
    const values = [
      partition,
      deliveries.map((d) => d.id),
      deliveries.map((d) => d.attempt),
      durable,
    ];
    return (await this.one('tw_ack', sql, values)).v as boolean[];
  }

  /**
   * One statement, so one commit, for every partition's acks: each its own tw_ack. Not durable:
   * the COMMIT does not wait for the WAL flush.
   */
  async ackMany(
    calls: ReadonlyArray<{ partition: number; deliveries: readonly Delivery[] }>,
  ): Promise<boolean[][]> {
    const values: unknown[] = [];
    const parts = calls.map(({ partition, deliveries }, k) => {
      const n = values.length;
      values.push(
        partition,
        deliveries.map((d) => d.id),
        deliveries.map((d) => d.attempt),
      );
      return `SELECT ${k} AS k, ${this.fn('tw_ack')}($${n + 1}::int, $${n + 2}::text[], $${n + 3}::int[], false) AS v`;
    });
    const sql = `SELECT * FROM (${parts.join(' UNION ALL ')}) x ORDER BY k`;
    return (await this.call('tw_ack', sql, values)).map((row) => row.v as boolean[]);
  }

  async nack(partition: number, retry: Retry, reason: string, _durable: boolean) {
    const sql = `SELECT ${this.fn('tw_nack')}($1::int, $2, $3::int, $4::float8, $5::bigint, $6) AS v`;
    const values = [partition, retry.id, retry.attempt, retry.due, retry.window, reason];
    const answer = (await this.one('tw_nack', sql, values)).v;
    return answer === 'retry' || answer === 'dead' ? answer : undefined;
  }
}
