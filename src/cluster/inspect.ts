/**
 * Read-only views of a cluster queue: counts per topic, dead letters, messages by time until
 * due, payloads, owners. Any node answers from Valkey alone; none walks over messages except
 * dead letters (up to the limit) and list() (by page). Each partition is asked separately (its
 * own slot), all at once: pipelined, a view costs a round trip per primary.
 */

import type { TopicStateCounts } from '../protocol/model.js';
import type { BackendListPage, ListQuery } from '../queue/list.js';
import { decodePayload } from '../queue/message.js';
import type { MessageInfo } from '../queue/types.js';
import type { Valkey } from '../valkey/connection.js';
import * as tw from './functions.js';
import { partitionPrefix } from './keys.js';
import { listPartitions } from './listing.js';
import { decodeRecord } from './record.js';

/** Live statuses, by their letters in the partitions' counts (lua/states.lua). */
const STATUSES: Record<string, Status> = { S: 'scheduled', R: 'ready', I: 'inflight', D: 'dead' };
type Status = keyof TopicCounts;

export type TopicCounts = TopicStateCounts;

export class ClusterInspector {
  constructor(
    private readonly valkey: Valkey,
    private readonly queue: string,
    private readonly partitions: number,
  ) {}

  /** The same read of every partition's key named `suffix`, in partition order. */
  private each(suffix: string, command: (key: string) => string[]): Promise<unknown[]> {
    return Promise.all(
      Array.from({ length: this.partitions }, (_, p) => {
        const key = partitionPrefix(this.queue, p) + suffix;
        return this.valkey.command(key, command(key), true);
      }),
    );
  }

  /** Live messages of the whole queue per topic and status, and their totals. */
  async counts(): Promise<{ totals: TopicCounts; topics: Record<string, TopicCounts> }> {
    const all = (await this.each('counts', (key) => ['HGETALL', key])) as Array<Record<
      string,
      string
    > | null>;
    const totals: TopicCounts = { scheduled: 0, ready: 0, inflight: 0, dead: 0 };
    const topics: Record<string, TopicCounts> = {};
    for (const counts of all) {
      for (const [field, value] of Object.entries(counts ?? {})) {
        const bar = field.lastIndexOf('|');
        const status = STATUSES[field.slice(bar + 1)];
        const n = Number(value);
        if (status === undefined || n === 0) continue;
        totals[status] += n;
        (topics[field.slice(0, bar)] ??= { scheduled: 0, ready: 0, inflight: 0, dead: 0 })[
          status
        ] += n;
      }
    }
    return { totals, topics };
  }

  /** Which node holds each partition's lease now ('' for none, or one that ran out). */
  async owners(): Promise<string[]> {
    const replies = await this.each('meta', (meta) => ['HMGET', meta, 'owner', 'leaseUntil']);
    const now = Date.now();
    return replies.map((reply) => {
      const [owner, until] = (reply ?? []) as Array<string | null>;
      // leaseUntil is by the server's clock: for display, a skew shows a lease a little off.
      return owner && Number(until) > now - 1_000 ? owner : '';
    });
  }

  /**
   * Dead messages of `topic` over every partition, oldest first: each partition's sorted set is
   * scored by its server's time of death (deliveries.lua), so partitions on different primaries
   * are merged by their servers' clocks.
   */
  async deadLetters(topic: string, limit: number): Promise<MessageInfo[]> {
    const replies = (await this.each(`dead:${topic}`, (key) => [
      'ZRANGE',
      key,
      '0',
      String(limit - 1),
      'WITHSCORES',
    ])) as Array<Array<[string, number]>>;
    const oldest: Array<{ id: string; died: number }> = [];
    // RESP3: a [member, score] pair per entry.
    for (const reply of replies) {
      for (const [entry, died] of reply) {
        oldest.push({ id: entry.slice(entry.indexOf(':') + 1), died: Number(died) });
      }
    }
    oldest.sort((a, b) => a.died - b.died);
    const found = await Promise.all(oldest.slice(0, limit).map(({ id }) => this.info(id)));
    return found.filter((info): info is MessageInfo => info?.status === 'dead');
  }

  list(query: ListQuery, windowMs: number): Promise<BackendListPage> {
    return listPartitions(this.valkey, this.queue, this.partitions, windowMs, query);
  }

  /** A message's state with the reason its latest delivery failed. */
  async info(id: string): Promise<MessageInfo | undefined> {
    const at = tw.messageAt(this.queue, this.partitions, id);
    const prefix = at.meta.slice(0, -4);
    const [info, reason] = await Promise.all([
      tw.get(this.valkey, at),
      this.valkey.command(`${prefix}reasons`, ['HGET', `${prefix}reasons`, id], true),
    ]);
    if (info !== undefined && typeof reason === 'string' && reason !== '') info.lastError = reason;
    return info;
  }

  /** The payload of a live or dead message, decoded as receive() would. */
  async payload(id: string): Promise<{ value: unknown } | undefined> {
    const found = await tw.stored(this.valkey, tw.messageAt(this.queue, this.partitions, id));
    if (found === undefined) return undefined;
    const record = decodeRecord(found.record);
    return { value: decodePayload(record.payloadKind, record.payload) };
  }

  /**
   * Scheduled messages by time until due. Those in windows not loaded yet count by their
   * window's start (their due time is within `windowMs` after it); the rest are due before the
   * loaded horizon and count as due now.
   */
  async dueHistogram(edgesMs: readonly number[], windowMs: number): Promise<number[]> {
    const now = Date.now();
    const [lives, metas, counts] = await Promise.all([
      this.each('live', (key) => ['HGETALL', key]),
      this.each('meta', (meta) => ['HGET', meta, 'loadedUntil']),
      this.each('counts', (key) => ['HGETALL', key]),
    ]);
    const histogram = new Array<number>(edgesMs.length + 1).fill(0);
    const add = (dueIn: number, n: number) => {
      let i = 0;
      while (i < edgesMs.length && dueIn >= edgesMs[i]) i++;
      histogram[i] += n;
    };
    for (let p = 0; p < this.partitions; p++) {
      const loadedUntil = Number(metas[p] ?? 0);
      let scheduled = 0;
      for (const [field, value] of Object.entries((counts[p] ?? {}) as Record<string, string>)) {
        if (field.endsWith('|S')) scheduled += Number(value);
      }
      let far = 0;
      for (const [seg, value] of Object.entries((lives[p] ?? {}) as Record<string, string>)) {
        if (seg[0] !== 'w') continue;
        const start = Number(seg.slice(1)) * windowMs;
        // Windows wholly past the loaded horizon hold only scheduled messages.
        if (start < loadedUntil) continue;
        const n = Number(value);
        far += n;
        add(Math.max(0, start - now), n);
      }
      add(0, Math.max(0, scheduled - far));
    }
    return histogram;
  }
}
