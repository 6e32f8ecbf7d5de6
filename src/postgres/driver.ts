/**
 * The PostgreSQL store of a partitioned queue (docs/postgres.md): PartitionDriver over a
 * queue's schema (install.ts), each call one statement that runs one function of sql/*.sql, so
 * each is atomic and owner-only ones check the lease's epoch in the transaction of their change.
 * Events come over the queue's channel (listener.ts); the calls on messages handed out are
 * deliveries.ts. A COMMIT is durable by PostgreSQL's own settings: durable() has nothing to wait
 * for, and `durability` names synchronous_commit. backend.ts opens a queue's node over it
 * (DelayQueue.open({ postgres })).
 */

import { outcomeUnknown, TickwheelRangeError, TickwheelStateError } from '../errors.js';
import type {
  At,
  Owner,
  PartitionDriver,
  Placed,
  SchedAnswer,
  SchedChange,
  ScheduleAnswer,
  ScheduleEntry,
  StoredRow,
  ToSchedule,
  TopicFields,
} from '../partitioned/driver.js';
import type { MessageStatus } from '../queue/message.js';
import type { RateLimit } from '../queue/topics.js';
import type { MessageInfo, TransactionClient } from '../queue/types.js';
import { checkOption, checkOptionsObject, invalidOption } from '../validate.js';
import { install, schemaOf } from './install.js';
import { ChannelListener } from './listener.js';
import { type PgPool, type PgResult, type PgSession, loadPg, named } from './pg.js';
import { checkPoolOptions, withSessionSettings } from './pool-settings.js';
import { PostgresDeliveries } from './deliveries.js';
import { num, runAgainIfAborted } from './reads.js';
import { ScheduleArgs } from './schedule-args.js';

export interface PostgresDriverOptions {
  /** A connection string, or a pool of the application's (then left open by close()). */
  postgres: string | PgPool;
  /** The queue's name: 1 to 64 of A-Z a-z 0-9 . _ : - (its schema is `tickwheel_<queue>`). */
  queue: string;
  /** Connections of the pool made from a connection string (default 10). */
  poolSize?: number;
  /** The most a statement may run before PostgreSQL cancels it (default 10,000 ms). */
  statementTimeoutMs?: number;
  /**
   * How often at most the tables of finished segments are looked for and dropped, after a
   * load (default 10,000 ms; 0: only when reap() is called).
   */
  reapEveryMs?: number;
  /** Errors of the LISTEN connection and of reaping, both retried by themselves (default: ignored). */
  onError?: (err: Error) => void;
}

const QUEUE_NAME = /^[A-Za-z0-9._:-]{1,64}$/;

/** Each status, by its letter in a state (sql/tables.sql): S R I D A C. */
const STATUS: MessageStatus[] = ['scheduled', 'ready', 'inflight', 'dead', 'acked', 'cancelled'];

/** How often an owner looks for what a lost notification hid (listener.ts says when it may have). */
const OWNER_POLL_MS = 10_000;
/**
 * A batch's messages without ids to one partition, up to this many: one tw_schedule a thousand
 * costs half the PostgreSQL CPU of eight (bench/results/postgres-located-runs).
 */
const LOCATED_RUN = 1024;

/** The most a connection of the driver's own pool may take to open. */
const CONNECT_MS = 10_000;
/** How long past statement_timeout an answer may take before the call gives up on it. */
const ANSWER_GRACE_MS = 5_000;

/** Tables of records dropped per reap() call. */
const REAP_MOST = 16;
/** SQLSTATE of a schedule whose segments' tables are not made yet (messages.sql, tw_schedule). */
const MISSING_SPANS = 'TW001';

/**
 * How long a statement refused for want of resources (SQLSTATE class 53) makes problem() answer:
 * the owners' lease renewals write every few hundred ms, so a shortage that lasts is seen again.
 */
const SHORT_FRESH_MS = 10_000;

export class PostgresDriver extends PostgresDeliveries implements PartitionDriver {
  readonly durability: { setting: string; option: string; reason: string };
  /** Segments whose tables a schedule found missing, and the making under way (makeSpans). */
  private readonly spansWanted = new Set<number>();
  private spansMaking: Promise<void> = Promise.resolve();
  /** LISTEN loses nothing while connected, and says `n` and `i` after a reconnect. */
  readonly ownerPollMs = OWNER_POLL_MS;
  readonly locatedRun = LOCATED_RUN;
  private readonly ownPool: boolean;
  private readonly reapEveryMs: number;
  private reaping: Promise<unknown> | undefined;
  private lastReap = 0;
  private closed = false;

  private constructor(
    private readonly pool: PgPool,
    private readonly listener: ChannelListener,
    options: {
      schema: string;
      ownPool: boolean;
      synchronousCommit: string;
      reapEveryMs: number;
      onError: (err: Error) => void;
    },
  ) {
    super(pool, options.schema, options.onError);
    this.reapEveryMs = options.reapEveryMs;
    this.ownPool = options.ownPool;
    const setting = options.synchronousCommit;
    this.durability = {
      setting,
      option: 'synchronous_commit',
      reason:
        setting === 'off'
          ? 'synchronous_commit is off: a commit is acknowledged before it is on disk, and a crash of PostgreSQL loses the last ones'
          : setting === 'remote_apply' || setting === 'on' || setting === 'remote_write'
            ? `synchronous_commit is ${setting}: a commit is acknowledged once on disk, and on synchronous standbys when synchronous_standby_names names them`
            : `synchronous_commit is ${setting}: a commit is acknowledged once on the primary's disk`,
    };
  }

  /** Connects, makes or brings up to date the queue's schema, and reads synchronous_commit. */
  static async open(options: PostgresDriverOptions): Promise<PostgresDriver> {
    checkOptionsObject(options, 'PostgresDriver options');
    const { queue, postgres } = options;
    if (typeof queue !== 'string' || !QUEUE_NAME.test(queue)) {
      throw new TickwheelRangeError(
        'ERR_TICKWHEEL_INVALID_OPTION',
        `queue must be 1 to 64 of A-Z a-z 0-9 . _ : -, got ${JSON.stringify(queue)}`,
      );
    }
    const { poolSize, timeout } = checkPoolOptions(options);
    const reapEveryMs = checkOption(options.reapEveryMs ?? 10_000, 'reapEveryMs', 0);
    const ownPool = typeof postgres === 'string';
    if (!ownPool && typeof (postgres as PgPool | undefined)?.query !== 'function') {
      throw invalidOption('postgres must be a connection string or a pg.Pool');
    }
    const pg = await loadPg();
    const config = {
      ...(typeof postgres === 'string' ? withSessionSettings(postgres) : {}),
      statement_timeout: timeout,
      // A host gone silent (packets dropped, not refused) fails a call rather than holding it
      // for as long as TCP keeps trying: connecting, a statement's answer, an idle connection.
      connectionTimeoutMillis: CONNECT_MS,
      query_timeout: timeout + ANSWER_GRACE_MS,
      keepAlive: true,
      keepAliveInitialDelayMillis: CONNECT_MS,
    };
    const pool = ownPool ? new pg.Pool({ ...config, max: poolSize }) : (postgres as PgPool);
    // An idle connection of our own pool that drops is replaced at the next query.
    if (ownPool) pool.on('error', () => undefined);
    const schema = schemaOf(queue);
    const onError = options.onError ?? (() => undefined);
    const listener = new ChannelListener(
      async () => new pg.Client(ownPool ? config : listenConfig(pool as PgPool)),
      schema,
      onError,
    );
    try {
      // One connection for the transaction: a pool may run each query on another.
      const client = await pool.connect();
      // A connection lost while held is an 'error' event, which kills the process unless heard.
      const lost = () => undefined;
      client.on?.('error', lost);
      try {
        await install(client, queue, schema, schema);
        client.off?.('error', lost);
        client.release();
      } catch (err) {
        // A connection whose transaction may still be open goes, not back to the pool.
        client.off?.('error', lost);
        client.release(true);
        throw err;
      }
      const shown = await pool.query('SHOW synchronous_commit');
      const setting = String(shown.rows[0]?.synchronous_commit ?? 'on');
      return new PostgresDriver(pool, listener, {
        schema,
        ownPool,
        synchronousCommit: setting,
        reapEveryMs,
        onError,
      });
    } catch (err) {
      if (ownPool) await pool.end().catch(() => undefined);
      throw named(err, `opening queue ${queue}`);
    }
  }

  async config(partitions: number, windowMs: number) {
    const row = await this.one(
      'tw_config',
      `SELECT ${this.fn('tw_config')}($1::int, $2::bigint) AS v`,
      [partitions, windowMs],
    );
    const [stored, window] = row.v as string[];
    return { partitions: num(stored), windowMs: num(window) };
  }

  async heartbeat(node: string, ttlMs: number): Promise<string[]> {
    const row = await this.one(
      'tw_heartbeat',
      `SELECT ${this.fn('tw_heartbeat')}($1, $2::bigint) AS v`,
      [node, Math.max(0, Math.floor(ttlMs))],
    );
    return row.v as string[];
  }

  async tokens(topic: string, limit: RateLimit, want: number) {
    const sql = `SELECT ${this.fn('tw_tokens')}($1, $2, $3, $4::bigint) AS v`;
    const args = [topic, String(limit.perSecond), String(limit.burst), Math.trunc(want)];
    const [granted, retryInMs] = (await this.one('tw_tokens', sql, args)).v as string[];
    return { granted: num(granted), retryInMs: num(retryInMs) };
  }

  async setTopicFields(
    kind: TopicFields,
    set: Record<string, string>,
    clear: string[],
    what: string,
  ): Promise<void> {
    const fields = Object.keys(set);
    await this.call(
      what,
      `WITH cleared AS (DELETE FROM ${this.q}.topic_fields WHERE kind = $1 AND field = ANY($4::text[]))
       INSERT INTO ${this.q}.topic_fields (kind, field, value)
       SELECT $1, f, v FROM unnest($2::text[], $3::text[]) AS x(f, v)
       ON CONFLICT (kind, field) DO UPDATE SET value = excluded.value`,
      [kind, fields, fields.map((field) => set[field]), clear.filter((f) => !(f in set))],
    );
  }

  async lease(partition: number, op: 'acquire' | 'renew' | 'release', by: Owner, leaseMs: number) {
    const sql = `SELECT granted, epoch, born FROM ${this.fn('tw_lease')}($1::int, $2, $3, $4::bigint, $5::bigint)`;
    const ttl = op === 'release' ? 0 : Math.floor(leaseMs);
    const row = await this.one(`tw_lease ${op}`, sql, [partition, op, by.node, by.epoch, ttl]);
    return { granted: row.granted === true, epoch: num(row.epoch), born: String(row.born) };
  }

  async renewMany(
    node: string,
    held: ReadonlyArray<{ partition: number; epoch: number }>,
    leaseMs: number,
  ): Promise<number[]> {
    const sql = `SELECT ${this.fn('tw_renew')}($1, $2::int[], $3::bigint[], $4::bigint) AS v`;
    const values = [node, held.map((h) => h.partition), held.map((h) => h.epoch)];
    const row = await this.one('tw_renew', sql, [...values, Math.floor(leaseMs)]);
    return (row.v as number[]).map(num);
  }

  /** A COMMIT answered is on the primary's disk, and on synchronous standbys as configured. */
  async grantKept(_partition: number, _timeoutMs: number): Promise<boolean> {
    return true;
  }

  schedule(partition: number, entries: readonly ScheduleEntry[]): Promise<ScheduleAnswer> {
    return this.scheduleOn(this.pool, partition, entries);
  }

  /** tw_schedule in the caller's open transaction: its notifications go out at its commit. */
  scheduleIn(
    client: TransactionClient,
    partition: number,
    entries: readonly ScheduleEntry[],
  ): Promise<ScheduleAnswer> {
    return this.scheduleOn(client as PgSession, partition, entries);
  }

  private async scheduleOn(
    session: PgSession,
    partition: number,
    entries: readonly ScheduleEntry[],
  ): Promise<ScheduleAnswer> {
    const args = new ScheduleArgs(entries);
    const sql =
      `SELECT ${this.fn('tw_schedule')}($1::int, $2::text[], $3::int[], $4::float8[], ` +
      `$5::bigint[], $6::text[], $7::bytea[], $8::int[], $9::bigint[], $10::float8[], ` +
      `$11::float8[], $12::text[], $13::boolean) AS v`;
    const values = [partition, ...args.values()];
    let rows: PgResult['rows'];
    if (session === this.pool) rows = await this.scheduleMakingSpans(sql, values);
    else {
      // The caller's transaction: aborted, it is the caller's to roll back and make again. The
      // tables it needs are made first on the queue's own connections: made in it, a table would
      // hold every call of the queue on `records` until the caller commits. (One dropped
      // meanwhile by reap() is made in it after all.)
      await this.makeSpans(await this.segmentsOf(args.allWindows()));
      try {
        rows = (await session.query(sql, [...values, true])).rows;
      } catch (err) {
        throw named(err, 'tw_schedule');
      }
    }
    const answer = rows?.[0]?.v as
      { existing: Array<number | null>; loadedUntil: number; where: unknown[] } | undefined;
    if (!Array.isArray(answer?.existing) || !Array.isArray(answer?.where)) {
      // A client of the caller's whose query() does not resolve to pg's { rows }.
      throw outcomeUnknown(
        new TickwheelStateError(
          'ERR_TICKWHEEL_INVALID_STATE',
          "tw_schedule's answer did not come back through the client given: its query(text, values) must resolve to { rows } as pg's does",
        ),
        undefined,
      );
    }
    const where: ScheduleAnswer['where'] = [];
    for (const place of answer.where as Array<Array<string | number>>) {
      for (let i = 0; i < place.length; i += 2) {
        where.push({ segment: String(place[i]), first: num(place[i + 1]) });
      }
    }
    return {
      existing: answer.existing.map((due) => (due === null ? undefined : num(due))),
      loadedUntil: num(answer.loadedUntil),
      where,
    };
  }

  /**
   * tw_schedule on the pool, the tables it needs made first, each time in a transaction of their
   * own (made in the schedule's, a table would hold every call on `records` until it ends).
   */
  private async scheduleMakingSpans(sql: string, values: unknown[]): Promise<PgResult['rows']> {
    for (let tries = 1; ; tries++) {
      try {
        return await runAgainIfAborted(this.pool, 'tw_schedule', sql, [...values, tries > 3]);
      } catch (err) {
        const cause = (err as { cause?: { code?: unknown; detail?: unknown } }).cause;
        if (cause?.code !== MISSING_SPANS || typeof cause.detail !== 'string') throw err;
        await this.makeSpans(cause.detail.split(',').map(Number));
      }
    }
  }

  /** The segments records of these windows go to now (window_seg), each once. */
  private async segmentsOf(windows: readonly number[]): Promise<number[]> {
    if (windows.length === 0) return [];
    const row = await this.one(
      'tw_schedule',
      `SELECT coalesce(array_agg(DISTINCT ${this.fn('window_seg')}(w, n.now_win)), '{}') AS v ` +
        `FROM (SELECT ${this.fn('now_window')}() AS now_win) n, unnest($1::bigint[]) AS w`,
      [windows],
    );
    // A window before 1970 has no table: tw_schedule refuses it.
    return (row.v as Array<string | number>).map(Number).filter((segment) => segment >= 0);
  }

  /**
   * Makes the tables of these segments: one call at a time for the whole node, each table in a
   * transaction of its own (making one locks `records` whole until it commits), the segments
   * wanted by calls that came meanwhile made by the next. Resolves once they are made, or once
   * a call that took them failed (the schedule then finds them missing again).
   */
  private makeSpans(segments: readonly number[]): Promise<void> {
    for (const segment of segments) this.spansWanted.add(segment);
    const made = this.spansMaking.then(async () => {
      const wanted = [...this.spansWanted].sort((a, b) => a - b);
      this.spansWanted.clear();
      for (const segment of wanted) {
        await this.one('making tables', `SELECT ${this.fn('hold_span')}($1::bigint)`, [segment]);
      }
    });
    this.spansMaking = made.catch(() => undefined);
    return made;
  }

  async scheduleOnce(partition: number, markMs: number, m: ToSchedule): Promise<boolean> {
    const sql =
      `SELECT ${this.fn('tw_schedule_once')}($1::int, $2::bigint, $3, $4::int, $5::float8, ` +
      `$6::bigint, $7, $8::bytea) AS v`;
    const values = [partition, Math.ceil(markMs), m.id, m.bucket, m.deliverAt, m.window, m.topic];
    const row = await this.one('tw_schedule_once', sql, [...values, m.record]);
    return row.v === true;
  }

  /** Nothing to wait for: each call's COMMIT is as durable as synchronous_commit makes it. */
  async durable(_partition: number, _what: string): Promise<void> {}

  async get(at: At): Promise<MessageInfo | undefined> {
    const sql = `SELECT ${this.fn('tw_get')}($1::int, $2, $3::int) AS v`;
    const state = (await this.one('tw_get', sql, [at.partition, at.id, at.bucket])).v as
      string[] | null;
    if (state === null || state === undefined) return undefined;
    const [status, due, attempts, topic] = state;
    const info = { id: at.id, topic, status: STATUS['SRIDAC'.indexOf(status)] };
    return { ...info, deliverAt: num(due), attempts: num(attempts) };
  }

  async stored(at: At) {
    const sql = `SELECT due, rec FROM ${this.fn('tw_record')}($1::int, $2, $3::int)`;
    const row = await this.one('tw_record', sql, [at.partition, at.id, at.bucket]);
    if (row.rec === null || row.rec === undefined) return undefined;
    return { deliverAt: num(row.due), record: row.rec as Buffer };
  }

  async cancel(at: At) {
    const sql = `SELECT topic, due, attempts FROM ${this.fn('tw_cancel')}($1::int, $2, $3::int)`;
    const row = await this.one('tw_cancel', sql, [at.partition, at.id, at.bucket]);
    if (row.topic === null || row.topic === undefined) return undefined;
    return { topic: String(row.topic), deliverAt: num(row.due), attempts: num(row.attempts) };
  }

  async move(kind: 'reschedule' | 'requeue', at: At, due: number, window: number) {
    const sql = `SELECT ${this.fn('tw_move')}($1, $2::int, $3, $4::int, $5::float8, $6::bigint) AS v`;
    const values = [kind, at.partition, at.id, at.bucket, due, window];
    return (await this.one(`tw_move ${kind}`, sql, values)).v === true;
  }

  async load(partition: number, by: Owner, to: number, rotate: boolean) {
    const sql = `SELECT ${this.fn('tw_load')}($1::int, $2, $3::bigint, $4::bigint, $5::boolean) AS v`;
    const values = [partition, by.node, by.epoch, Math.floor(to), rotate];
    const answer = (await this.one('tw_load', sql, values)).v as string[] | null;
    if (answer === null || answer === undefined) return undefined;
    this.reapSoon();
    return { loadedUntil: num(answer[0]), near: `n${answer[1]}`, seq: num(answer[2]) };
  }

  async read(partition: number, seg: string, from: number, max: number) {
    const sql = `SELECT * FROM ${this.fn('tw_read')}($1::int, $2, $3::int, $4::int)`;
    const row = await this.one('tw_read', sql, [partition, seg, from, max]);
    const idx = (row.idx as number[] | null) ?? [];
    const live: StoredRow[] = idx.map((index, i) => ({
      id: (row.ids as string[])[i],
      index,
      status: (row.status as string[])[i],
      deliverAt: num((row.due as number[])[i]),
      attempts: num((row.attempts as number[])[i]),
      record: (row.recs as Buffer[])[i],
    }));
    return { scanned: num(row.scanned), live };
  }

  async fire(partition: number, by: Owner, skewMs: number, at: readonly Placed[]) {
    const sql =
      `SELECT fired, early, seq FROM ${this.fn('tw_fire')}($1::int, $2, $3::bigint, $4::bigint, ` +
      `$5::text[], $6::int[], $7::text[], $8::int[])`;
    const values = [partition, by.node, by.epoch, Math.floor(skewMs)];
    const lists = [at.map((d) => d.id), at.map((d) => d.bucket), at.map((d) => d.seg)];
    const row = await this.one('tw_fire', sql, [...values, ...lists, at.map((d) => d.index)]);
    if (row.seq === null || row.seq === undefined) return undefined;
    return { fired: num(row.fired), early: row.early as string[], seq: num(row.seq) };
  }

  /** One statement, so one commit, for every partition's fires: each its own tw_fire. */
  async fireMany(
    calls: ReadonlyArray<{ partition: number; by: Owner; at: readonly Placed[] }>,
    skewMs: number,
  ) {
    const values: unknown[] = [Math.floor(skewMs)];
    const parts = calls.map(({ partition, by, at }, k) => {
      const n = values.length;
      values.push(
        partition,
        by.node,
        by.epoch,
        at.map((d) => d.id),
        at.map((d) => d.bucket),
      );
      values.push(
        at.map((d) => d.seg),
        at.map((d) => d.index),
      );
      return (
        `SELECT ${k} AS k, fired, early, seq FROM ${this.fn('tw_fire')}($${n + 1}::int, $${n + 2}, ` +
        `$${n + 3}::bigint, $1::bigint, $${n + 4}::text[], $${n + 5}::int[], $${n + 6}::text[], ` +
        `$${n + 7}::int[])`
      );
    });
    const sql = `SELECT * FROM (${parts.join(' UNION ALL ')}) x ORDER BY k`;
    const rows = await this.call('tw_fire', sql, values);
    return rows.map((row) =>
      row.seq === null || row.seq === undefined
        ? undefined
        : { fired: num(row.fired), early: row.early as string[], seq: num(row.seq) },
    );
  }

  async sched(change: SchedChange): Promise<SchedAnswer> {
    const args = '$1, $2, $3::bigint, $4, $5, $6::bigint, $7::bigint';
    const sql = `SELECT ${this.fn('tw_sched')}(${args}) AS v`;
    const record = change.op === 'del' ? null : change.record;
    const by = change.op === 'save' ? change.by : undefined;
    const most = change.op === 'put' ? change.most : null;
    const values = [change.op, change.name, change.version, record, by?.node ?? null];
    const row = await this.one(`tw_sched ${change.op}`, sql, [...values, by?.epoch ?? null, most]);
    const [done, version] = (row.v as string[]).map(num);
    if (done === -2) return { done: false, fenced: false, version: 0, full: version };
    return { done: done === 1, fenced: done === -1, version };
  }

  protected readyAt(partition: number, topic: string, at: number): void {
    this.listener.tell(partition, `a ${at} ${topic}`);
  }

  subscribe(partition: number, listener: (event: string) => void) {
    return this.listener.subscribe(partition, listener).catch((err: unknown) => {
      throw named(err, 'LISTEN');
    });
  }

  async problem(): Promise<string | undefined> {
    // Short of disk, say: SELECT 1 is answered while every write is refused.
    const short = this.resourcesShort(SHORT_FRESH_MS);
    if (short !== undefined) return short;
    const answered = this.pool.query('SELECT 1').then(
      () => undefined,
      (err: unknown) => `PostgreSQL did not answer: ${(err as Error).message}`,
    );
    const late = new Promise<string>((resolve) => {
      const timer = setTimeout(() => resolve('PostgreSQL did not answer within a second'), 1_000);
      void answered.finally(() => clearTimeout(timer));
    });
    return Promise.race([answered, late]);
  }

  /**
   * Drops the tables of records whose segments hold nothing live any more, and folds the rows
   * of counts: what frees the space of finished windows. The names of the tables dropped.
   */
  async reap(): Promise<string[]> {
    await this.call('folding counts', `SELECT ${this.fn('fold')}()`, []);
    const row = await this.one('reap', `SELECT ${this.fn('reap')}($1::int) AS v`, [REAP_MOST]);
    return row.v as string[];
  }

  /** A reap in the background, one at a time, at most once per reapEveryMs. */
  private reapSoon(): void {
    const now = performance.now();
    if (
      this.reapEveryMs === 0 ||
      this.reaping !== undefined ||
      now - this.lastReap < this.reapEveryMs
    )
      return;
    this.lastReap = now;
    this.reaping = this.reap()
      .catch((err: unknown) => {
        if (!this.closed) this.onError(err as Error);
      })
      .finally(() => (this.reaping = undefined));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.reaping;
    await this.listener.close();
    if (this.ownPool) await this.pool.end();
  }
}

/**
 * The LISTEN connection's settings for a pool of the application's: the pool's own (pg.Pool
 * keeps them in `options`), without what is the pool's alone.
 */
function listenConfig(pool: PgPool): Record<string, unknown> {
  const options = (pool as unknown as { options?: Record<string, unknown> }).options ?? {};
  const { max: _max, min: _min, idleTimeoutMillis: _idle, ...client } = options;
  return client;
}
