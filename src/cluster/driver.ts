/**
 * The partitioned engine's store on Valkey/Redis (src/partitioned/driver.ts): each call one
 * function of the library (functions.ts) or one command on a partition's keys (keys.ts), in the
 * partition's slot. Two connections: `valkey` for the owners, consumers and reads, and `writes`
 * for the writes a durability wait covers (schedules, cancels, moves, settings, recurring
 * records, durable acks and nacks); a WAIT holds its connection until replicas answer, which
 * would hold up lease renewals and fires as long. With durability 'async' they are one.
 *
 * A durability wait ('replicated': WAIT 1, 'fsynced': WAITAOF 1 1) is sent after the write's
 * reply, never pipelined with it (a WAITAOF in the same flush waits for the replica's
 * once-a-second acknowledgement), and shared: one covers every write whose reply came before it
 * was sent, so there is one wait per primary and round.
 */

import { outcomeUnknown, TickwheelUnavailableError } from '../errors.js';
import type { MessageInfo } from '../queue/types.js';
import type { RateLimit } from '../queue/topics.js';
import {
  withRecords,
  type At,
  type Delivery,
  type Owner,
  type PartitionDriver,
  type Placed,
  STATUS_LETTERS,
  type Retry,
  type SchedAnswer,
  type SchedChange,
  type ScheduleAnswer,
  type ScheduleEntry,
  type StoredRow,
  type ToSchedule,
  type TopicFields,
} from '../partitioned/driver.js';
import { withinMs } from '../valkey/reach.js';
import type { Durability, DurabilityOption } from './durability.js';
import * as tw from './functions.js';
import type { ClusterValkey } from './functions.js';
import {
  configKey,
  eventsChannel,
  metaKey,
  nodesKey,
  partitionPrefix,
  pushKey,
  tokensKey,
  topicsKey,
} from './keys.js';

export interface ValkeyDriverOptions {
  queue: string;
  durability: Durability;
  durabilityOption: DurabilityOption;
  /** Why that durability, in words for a log. */
  durabilityReason: string;
  /** How long a durability wait may take. Default 5,000 ms. */
  durabilityTimeoutMs?: number;
  /** Faults that no call answers with: a message dropped because its record was gone. */
  onError?: (err: Error) => void;
}

type Hash = Record<string, string> | null;

/**
 * How long a maxmemory refusal makes problem() answer: the owners' lease renewals are writes
 * refused as long as the server stays full, so this holds while it does, and ends after.
 */
const OOM_FRESH_MS = 10_000;

export class ValkeyDriver implements PartitionDriver {
  readonly durability: { setting: Durability; option: DurabilityOption; reason: string };
  private readonly queue: string;
  private readonly waitTimeoutMs: number;
  private readonly onError: (err: Error) => void;
  /** Per primary: the last durability wait queued, and the one not sent yet (sharedWait). */
  private readonly lanes = new Map<
    string,
    { last: Promise<unknown>; unsent?: Promise<unknown> | undefined }
  >();

  constructor(
    readonly valkey: ClusterValkey,
    readonly writes: ClusterValkey,
    options: ValkeyDriverOptions,
  ) {
    this.queue = options.queue;
    this.waitTimeoutMs = options.durabilityTimeoutMs ?? 5_000;
    this.onError = options.onError ?? (() => undefined);
    this.durability = {
      setting: options.durability,
      option: options.durabilityOption,
      reason: options.durabilityReason,
    };
  }

  config(partitions: number, windowMs: number) {
    return tw.config(this.valkey, configKey(this.queue), partitions, windowMs);
  }

  heartbeat(node: string, ttlMs: number): Promise<string[]> {
    return tw.heartbeat(this.valkey, nodesKey(this.queue), node, ttlMs);
  }

  tokens(topic: string, limit: RateLimit, want: number) {
    return tw.tokens(this.valkey, tokensKey(this.queue, topic), limit, want);
  }

  async topicFields(kind: TopicFields) {
    const where = this.topicsKeyOf(kind);
    return { where, fields: await this.valkey.hash(where) };
  }

  async setTopicFields(
    kind: TopicFields,
    set: Record<string, string>,
    clear: string[],
    what: string,
  ): Promise<void> {
    const key = this.topicsKeyOf(kind);
    const fields = Object.entries(set).flat();
    if (fields.length > 0) await this.writes.command(key, ['HSET', key, ...fields]);
    if (clear.length > 0) await this.writes.command(key, ['HDEL', key, ...clear]);
    await this.waitFor(key, what);
  }

  private topicsKeyOf(kind: TopicFields): string {
    return kind === 'settings' ? topicsKey(this.queue) : pushKey(this.queue);
  }

  lease(partition: number, op: 'acquire' | 'renew' | 'release', by: Owner, leaseMs: number) {
    return tw.lease(this.valkey, this.meta(partition), op, by, leaseMs);
  }

  /**
   * The grant reached a replica (WAIT, on the connection that wrote it). Without a replica, or
   * with durability 'async', there is no failover to fear: the grant stands at once.
   */
  async grantKept(partition: number, timeoutMs: number): Promise<boolean> {
    if (this.durability.setting === 'async') return true;
    const meta = this.meta(partition);
    if ((await this.valkey.replicas(meta)).count === 0) return true;
    return Number(await this.valkey.command(meta, ['WAIT', '1', String(timeoutMs)])) >= 1;
  }

  leaseHolders(partitions: number): Promise<Array<{ owner: string; until: number }>> {
    return this.each(partitions, async (p) => {
      const meta = this.meta(p);
      const reply = await this.valkey.command(meta, ['HMGET', meta, 'owner', 'leaseUntil'], true);
      const [owner, until] = (reply ?? []) as Array<string | null>;
      return { owner: owner ?? '', until: Number(until ?? 0) };
    });
  }

  schedule(partition: number, entries: readonly ScheduleEntry[]): Promise<ScheduleAnswer> {
    return tw.schedule(this.writes, this.meta(partition), entries);
  }

  scheduleOnce(partition: number, markMs: number, message: ToSchedule): Promise<boolean> {
    return tw.scheduleOnce(this.writes, this.meta(partition), markMs, message);
  }

  durable(partition: number, what: string): Promise<void> {
    return this.waitFor(this.meta(partition), what);
  }

  get(at: At): Promise<MessageInfo | undefined> {
    return tw.get(this.valkey, this.meta(at.partition), at);
  }

  stored(at: At) {
    return tw.stored(this.valkey, this.meta(at.partition), at);
  }

  cancel(at: At) {
    return tw.cancel(this.writes, this.meta(at.partition), at);
  }

  move(kind: 'reschedule' | 'requeue', at: At, due: number, window: number): Promise<boolean> {
    return tw.move(this.writes, kind, this.meta(at.partition), at, due, window);
  }

  load(partition: number, by: Owner, to: number, rotate: boolean) {
    return tw.load(this.valkey, this.meta(partition), by, to, rotate);
  }

  async nearSegments(partition: number): Promise<string[]> {
    const key = `${partitionPrefix(this.queue, partition)}live`;
    const segments = (await this.valkey.command(key, ['HKEYS', key], true)) as string[] | null;
    return (segments ?? []).filter((seg) => seg.startsWith('n'));
  }

  async windows(partition: number, from: number, before: number, limit?: number) {
    const key = `${partitionPrefix(this.queue, partition)}windows`;
    const min = from === -Infinity ? '-inf' : String(from);
    const max = before === Infinity ? '+inf' : `(${before}`;
    const command = ['ZRANGEBYSCORE', key, min, max];
    if (limit !== undefined) command.push('LIMIT', '0', String(limit));
    const windows = (await this.valkey.command(key, command, true)) as string[] | null;
    return (windows ?? []).map(Number);
  }

  read(
    partition: number,
    seg: string,
    from: number,
    max: number,
  ): Promise<{ scanned: number; live: StoredRow[] }> {
    return tw.read(this.valkey, this.meta(partition), seg, from, max);
  }

  fire(partition: number, by: Owner, skewMs: number, at: readonly Placed[]) {
    return tw.fire(this.valkey, this.meta(partition), by, skewMs, at);
  }

  async overdue(
    partition: number,
    upTo: number,
    max: number,
  ): ReturnType<PartitionDriver['overdue']> {
    const rows = await tw.overdue(this.valkey, this.meta(partition), upTo, max);
    const kept = this.withRecords(partition, rows, 'in flight');
    // Only lost ones: those behind them instead (the lost ones are gone, so this ends).
    return kept.length === 0 && rows.length > 0 ? this.overdue(partition, upTo, max) : kept;
  }

  expire(partition: number, by: Owner, deliveries: readonly Retry[]) {
    return tw.expire(this.valkey, this.meta(partition), by, deliveries);
  }

  async earliestVisibility(partition: number): Promise<number> {
    const key = `${partitionPrefix(this.queue, partition)}inflight`;
    // RESP3: [[member, score]]
    const first = (await this.valkey.command(key, [
      'ZRANGE',
      key,
      '0',
      '0',
      'WITHSCORES',
    ])) as Array<[string, number]> | null;
    return first === null || first.length === 0 ? Infinity : Number(first[0][1]);
  }

  async take(
    partition: number,
    topic: string,
    max: number,
    visibilityMs: number,
    maxBytes: number,
  ): ReturnType<PartitionDriver['take']> {
    const meta = this.meta(partition);
    const rows = await tw.take(this.valkey, meta, topic, max, visibilityMs, maxBytes);
    const kept = this.withRecords(partition, rows, `ready (topic ${topic})`);
    if (kept.length > 0 || rows.length === 0) return kept;
    return this.take(partition, topic, max, visibilityMs, maxBytes);
  }

  private withRecords<R extends { id: string; record: unknown }>(
    partition: number,
    rows: R[],
    was: string,
  ) {
    return withRecords(
      rows,
      partition,
      was,
      'docs/cluster.md, "Durability settings"',
      this.onError,
    );
  }

  /** One LLEN a partition, sent together (pipelined per primary). */
  async readyPartitions(topic: string, partitions: number): Promise<number[]> {
    const lengths = await Promise.all(
      Array.from({ length: partitions }, (_, p) => {
        const key = `${partitionPrefix(this.queue, p)}ready:${topic}`;
        return this.valkey.command(key, ['LLEN', key], true);
      }),
    );
    return lengths.flatMap((n, p) => (Number(n) > 0 ? [p] : []));
  }

  /** `durable`: on the writes' connection, where the durability wait covers it. */
  async ack(partition: number, deliveries: readonly Delivery[], durable: boolean) {
    const meta = this.meta(partition);
    if (!durable) return tw.ack(this.valkey, meta, deliveries);
    const done = await tw.ack(this.writes, meta, deliveries);
    const what =
      deliveries.length === 1 ? `the ack of ${deliveries[0].id}` : `${deliveries.length} acks`;
    // Written, maybe not kept: after a failover the message may be delivered again.
    await this.waitFor(meta, what).catch((err: unknown) => {
      throw outcomeUnknown(err, undefined);
    });
    return done;
  }

  async nack(partition: number, retry: Retry, reason: string, durable: boolean) {
    const meta = this.meta(partition);
    const outcome = await tw.nack(durable ? this.writes : this.valkey, meta, retry, reason);
    if (durable) {
      await this.waitFor(meta, `the nack of ${retry.id}`).catch((err: unknown) => {
        throw outcomeUnknown(err, undefined);
      });
    }
    if (outcome !== 'lost') return outcome;
    this.withRecords(partition, [{ id: retry.id, record: null }], 'nacked');
    return undefined;
  }

  async counts(partition: number): Promise<Record<string, number>> {
    return numbers(await this.partitionHash(partition, 'counts'));
  }

  async topicCounts(partition: number, topic: string): Promise<Record<string, number>> {
    const key = partitionPrefix(this.queue, partition) + 'counts';
    const fields = STATUS_LETTERS.map((letter) => `${topic}|${letter}`);
    const values = (await this.valkey.command(key, ['HMGET', key, ...fields], true)) as Array<
      string | null
    >;
    const counts: Record<string, number> = {};
    STATUS_LETTERS.forEach((letter, i) => {
      if (values?.[i] != null) counts[letter] = Number(values[i]);
    });
    return counts;
  }

  async segmentSizes(partition: number): Promise<Record<string, number>> {
    return numbers(await this.partitionHash(partition, 'live'));
  }

  async loadedUntil(partition: number): Promise<number> {
    const meta = this.meta(partition);
    return Number((await this.valkey.command(meta, ['HGET', meta, 'loadedUntil'], true)) ?? 0);
  }

  /** The sorted set is scored by the server's time of death (deliveries.lua). */
  async dead(partition: number, topic: string, limit: number) {
    const key = `${partitionPrefix(this.queue, partition)}dead:${topic}`;
    const command = ['ZRANGE', key, '0', String(limit - 1), 'WITHSCORES'];
    // RESP3: a [member, score] pair per entry; a member is `<bucket>:<id>`.
    const entries = ((await this.valkey.command(key, command, true)) ?? []) as Array<
      [string, number]
    >;
    return entries.map(([entry, died]) => ({
      id: entry.slice(entry.indexOf(':') + 1),
      died: Number(died),
    }));
  }

  async reasons(partition: number, ids: readonly string[]): Promise<Array<string | undefined>> {
    if (ids.length === 0) return [];
    const key = `${partitionPrefix(this.queue, partition)}reasons`;
    const reasons = (await this.valkey.command(key, ['HMGET', key, ...ids], true)) as unknown[];
    return reasons.map((reason) => (typeof reason === 'string' ? reason : undefined));
  }

  sched(change: SchedChange): Promise<SchedAnswer> {
    return tw.sched(this.writes, this.meta(0), change);
  }

  async schedRecord(name: string): Promise<string | undefined> {
    const key = this.schedKey();
    const text = (await this.valkey.command(key, ['HGET', key, name])) as string | null;
    return text ?? undefined;
  }

  schedRecords(): Promise<Record<string, string>> {
    return this.valkey.hash(this.schedKey());
  }

  async schedChanges(): Promise<string | null> {
    const key = `${this.schedKey()}v`;
    return (await this.valkey.command(key, ['GET', key])) as string | null;
  }

  /** The recurring schedules' records, beside partition 0's lease (recurring.lua). */
  private schedKey(): string {
    return `${partitionPrefix(this.queue, 0)}sched`;
  }

  subscribe(partition: number, listener: (event: string) => void) {
    return this.valkey.subscribe(eventsChannel(this.queue, partition), listener);
  }

  /**
   * A PING on the queue's config slot, answered within a second or not; then whether writes
   * were refused for the server's maxmemory within the last OOM_FRESH_MS.
   */
  async problem(): Promise<string | undefined> {
    const late = () => new Error('Valkey/Redis did not answer within 1000 ms');
    const key = configKey(this.queue);
    try {
      await withinMs(this.valkey.command(key, ['PING']), 1_000, late);
    } catch (err) {
      return err instanceof Error ? err.message : String(err);
    }
    return this.writes.writesRefused(OOM_FRESH_MS) ?? this.valkey.writesRefused(OOM_FRESH_MS);
  }

  async close(): Promise<void> {
    await this.valkey.close();
    if (this.writes !== this.valkey) await this.writes.close();
  }

  private meta(partition: number): string {
    return metaKey(this.queue, partition);
  }

  private async partitionHash(partition: number, suffix: string): Promise<Hash> {
    const key = partitionPrefix(this.queue, partition) + suffix;
    return (await this.valkey.command(key, ['HGETALL', key], true)) as Hash;
  }

  private each<T>(partitions: number, read: (partition: number) => Promise<T>): Promise<T[]> {
    return Promise.all(Array.from({ length: partitions }, (_, p) => read(p)));
  }

  /**
   * Waits until the writes sent so far on `key`'s primary are as durable as the node keeps them:
   * a write joins the wait not yet sent on its primary (sharedWait).
   */
  private async waitFor(key: string, what: string): Promise<void> {
    const setting = this.durability.setting;
    if (setting === 'async') return;
    // A primary without a replica for a whole wait timeout fails at once rather than hold the
    // connection that long again (before that, a replica may be syncing or coming back).
    if ((await this.writes.replicas(key)).noneForMs >= this.waitTimeoutMs) {
      throw notDurable(what, `its primary has had no replica for ${this.waitTimeoutMs} ms or more`);
    }
    const timeout = String(this.waitTimeoutMs);
    const reply = await this.sharedWait(key);
    if (setting === 'replicated') {
      if (Number(reply) >= 1) return;
      throw notDurable(what, `no replica acknowledged it within ${timeout} ms`);
    }
    const [local, replicas] = (reply as number[]).map(Number);
    if (local >= 1 && replicas >= 1) return;
    throw notDurable(
      what,
      `fsynced locally ${local >= 1 ? 'yes' : 'no'}, on replicas ${replicas} of 1, within ${timeout} ms`,
    );
  }

  /** The wait not yet sent on `key`'s primary, joined, or a new one queued behind the last. */
  private sharedWait(key: string): Promise<unknown> {
    const target = this.writes.primaryOf(key);
    let lane = this.lanes.get(target);
    if (lane === undefined) this.lanes.set(target, (lane = { last: Promise.resolve() }));
    if (lane.unsent !== undefined) return lane.unsent;
    const command =
      this.durability.setting === 'replicated'
        ? ['WAIT', '1', String(this.waitTimeoutMs)]
        : ['WAITAOF', '1', '1', String(this.waitTimeoutMs)];
    const current = lane;
    const wait: Promise<unknown> = current.last
      .catch(() => {})
      .then(() => {
        // From here on a write must not join: its reply may come after this WAIT is sent.
        if (current.unsent === wait) current.unsent = undefined;
        return this.writes.command(key, command);
      });
    current.unsent = wait;
    current.last = wait;
    return wait;
  }
}

function numbers(hash: Hash): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [field, value] of Object.entries(hash ?? {})) out[field] = Number(value);
  return out;
}

function notDurable(what: string, why: string): TickwheelUnavailableError {
  return new TickwheelUnavailableError(
    'ERR_TICKWHEEL_NOT_DURABLE',
    `${what} reached the primary, but ${why}; it may not survive a failover. A primary that has lost its replica needs one again; on servers with no replica at all, durability 'auto' (the default) is 'async'`,
  );
}
