/**
 * Read-only views of a cluster queue: counts, dead letters, due times, payloads, owners, pages.
 * Any node answers from Valkey alone, each partition asked separately (its own slot) and all at
 * once; none walks over messages except dead letters (up to the limit) and list() (by page).
 */

import type { TopicStateCounts as TopicCounts } from '../protocol/model.js';
import {
  compareKeys,
  inRange,
  mergePages,
  SEQ_BEFORE,
  SmallestKeys,
  type BackendListPage,
  type KeyedPart,
  type ListKey,
  type ListQuery,
} from '../queue/list.js';
import { decodePayload } from '../queue/message.js';
import type { MessageInfo } from '../queue/types.js';
import type { Valkey } from '../valkey/connection.js';
import * as tw from '../cluster/functions.js';
import { metaKey, partitionPrefix } from '../cluster/keys.js';
import { decodeRecord, placeOf } from './record.js';

/** Live statuses, by their letters in the partitions' counts (lua/states.lua). */
const STATUSES: Record<string, Status> = { S: 'scheduled', R: 'ready', I: 'inflight', D: 'dead' };
type Status = keyof TopicCounts;
type Hash = Record<string, string> | null;

interface SegmentPart {
  items: Array<{ message: MessageInfo; key: ListKey }>;
  scanned: number;
}

/** Records a partition's page reads at most before it stops at a window's start. */
const PARTITION_SCAN_RECORDS = 8_192;
const RECORDS_PER_READ = 1_000;
const WINDOWS_PER_READ = 16;

export class ClusterInspector {
  constructor(
    private readonly valkey: Valkey,
    private readonly queue: string,
    private readonly partitions: number,
    private readonly windowMs: number,
  ) {}

  /** The same read of every partition's key named `suffix`, in partition order. */
  private each<T = unknown>(suffix: string, command: (key: string) => string[]): Promise<T[]> {
    return Promise.all(
      Array.from({ length: this.partitions }, (_, p) => {
        const key = partitionPrefix(this.queue, p) + suffix;
        return this.valkey.command(key, command(key), true) as Promise<T>;
      }),
    );
  }

  /** Live messages of the whole queue per topic and status, and their totals. */
  async counts(): Promise<{ totals: TopicCounts; topics: Record<string, TopicCounts> }> {
    const all = await this.each<Hash>('counts', (key) => ['HGETALL', key]);
    const none = (): TopicCounts => ({ scheduled: 0, ready: 0, inflight: 0, dead: 0 });
    const totals = none();
    const topics: Record<string, TopicCounts> = {};
    for (const counts of all) {
      for (const [field, value] of Object.entries(counts ?? {})) {
        const bar = field.lastIndexOf('|');
        const status = STATUSES[field.slice(bar + 1)];
        const n = Number(value);
        if (status === undefined || n === 0) continue;
        totals[status] += n;
        (topics[field.slice(0, bar)] ??= none())[status] += n;
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
    // RESP3: a [member, score] pair per entry.
    const replies = await this.each<Array<[string, number]>>(`dead:${topic}`, (key) => [
      'ZRANGE',
      key,
      '0',
      String(limit - 1),
      'WITHSCORES',
    ]);
    const oldest = replies
      .flat()
      .map(([entry, died]) => ({ id: entry.slice(entry.indexOf(':') + 1), died: Number(died) }))
      .sort((a, b) => a.died - b.died);
    const found = await Promise.all(oldest.slice(0, limit).map(({ id }) => this.info(id)));
    return found.filter((info): info is MessageInfo => info?.status === 'dead');
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
  async dueHistogram(edgesMs: readonly number[]): Promise<number[]> {
    const now = Date.now();
    const [lives, metas, counts] = await Promise.all([
      this.each<Hash>('live', (key) => ['HGETALL', key]),
      this.each<string | null>('meta', (meta) => ['HGET', meta, 'loadedUntil']),
      this.each<Hash>('counts', (key) => ['HGETALL', key]),
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
      for (const [field, value] of Object.entries(counts[p] ?? {})) {
        if (field.endsWith('|S')) scheduled += Number(value);
      }
      let far = 0;
      for (const [seg, value] of Object.entries(lives[p] ?? {})) {
        if (seg[0] !== 'w') continue;
        const start = Number(seg.slice(1)) * this.windowMs;
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

  async list(query: ListQuery): Promise<BackendListPage> {
    const parts = await Promise.all(
      Array.from({ length: this.partitions }, (_, p) => this.listPartition(p, query)),
    );
    const page = mergePages(query.limit, parts);
    const messages = page.items.map(({ message }) => message);
    await this.addReasons(messages);
    return { messages, next: page.through };
  }

  /** Sets each message's lastError as info() does: one HMGET of `reasons` per partition. */
  private async addReasons(messages: MessageInfo[]): Promise<void> {
    const byPartition = new Map<number, MessageInfo[]>();
    for (const message of messages) {
      const { partition } = placeOf(message.id, this.partitions);
      let those = byPartition.get(partition);
      if (those === undefined) byPartition.set(partition, (those = []));
      those.push(message);
    }
    await Promise.all(
      [...byPartition].map(async ([partition, those]) => {
        const key = `${partitionPrefix(this.queue, partition)}reasons`;
        const ids = those.map((message) => message.id);
        const reasons = (await this.valkey.command(key, ['HMGET', key, ...ids], true)) as unknown[];
        those.forEach((message, i) => {
          const reason = reasons[i];
          if (typeof reason === 'string' && reason !== '') message.lastError = reason;
        });
      }),
    );
  }

  /**
   * A partition's page: its near segments whole, then its window segments (`w<n>`: only messages
   * due in window n, in schedule order) from the page's start, each whole, stopping before the
   * next window once it has the page or has read PARTITION_SCAN_RECORDS: complete up to that
   * window's start. The merged page ends where the first partition stopped (docs/cluster.md).
   */
  private async listPartition(
    partition: number,
    query: ListQuery,
  ): Promise<KeyedPart<MessageInfo>> {
    const { valkey, windowMs } = this;
    const meta = metaKey(this.queue, partition);
    const prefix = partitionPrefix(this.queue, partition);
    const found = new SmallestKeys<MessageInfo>(query.limit + 1);
    let scanned = 0;
    let matched = 0;
    const take = (segment: SegmentPart) => {
      scanned += segment.scanned;
      matched += segment.items.length;
      for (const { message, key } of segment.items) found.push(message, key);
    };

    const lo = Math.max(query.from, query.after?.deliverAt ?? -Infinity);
    const [segments, loadedUntil] = (await Promise.all([
      valkey.command(`${prefix}live`, ['HKEYS', `${prefix}live`], true),
      valkey.command(meta, ['HGET', meta, 'loadedUntil'], true),
    ])) as [string[] | null, string | null];
    // Near segments hold messages due before loadedUntil: a page starting after it skips them.
    const pastNear = loadedUntil !== null && lo > Number(loadedUntil);
    const near = pastNear ? [] : (segments ?? []).filter((seg) => seg.startsWith('n'));
    (await Promise.all(near.map((seg) => this.readSegment(meta, seg, query)))).forEach(take);

    let min = Number.isFinite(lo) ? String(Math.floor(lo / windowMs)) : '-inf';
    let through: ListKey | undefined;
    let windowsRead = 0;
    scan: for (;;) {
      const windows = (await valkey.command(
        `${prefix}windows`,
        ['ZRANGEBYSCORE', `${prefix}windows`, min, '+inf', 'LIMIT', '0', String(WINDOWS_PER_READ)],
        true,
      )) as string[] | null;
      if (windows === null || windows.length === 0) break;
      const starts = windows.map((window) => Number(window) * windowMs);
      // Read together (pipelined), taken in window order.
      const reads = windows.map((window, i) =>
        starts[i] < query.until ? this.readSegment(meta, `w${window}`, query) : undefined,
      );
      // A failed read is thrown by the await that takes it; the others must not go unhandled.
      for (const read of reads) read?.catch(() => undefined);
      for (let i = 0; i < windows.length; i++) {
        const read = reads[i];
        if (read === undefined) break scan;
        if (windowsRead > 0 && (matched > query.limit || scanned >= PARTITION_SCAN_RECORDS)) {
          through = { deliverAt: starts[i], seq: SEQ_BEFORE, id: '' };
          break scan;
        }
        take(await read);
        windowsRead++;
      }
      if (windows.length < WINDOWS_PER_READ) break;
      min = `(${windows[windows.length - 1]}`;
    }
    const part = found.part();
    if (
      part.through !== undefined &&
      (through === undefined || compareKeys(part.through, through) < 0)
    ) {
      through = part.through;
    }
    return { items: part.items, through };
  }

  private async readSegment(meta: string, seg: string, query: ListQuery): Promise<SegmentPart> {
    const items: SegmentPart['items'] = [];
    let scanned = 0;
    for (let from = 0; ; from += RECORDS_PER_READ) {
      const { scanned: read, live } = await tw.read(this.valkey, meta, seg, from, RECORDS_PER_READ);
      scanned += read;
      for (const row of live) {
        const status = STATUSES[row.status];
        if (status === undefined || status === 'dead') continue;
        const key: ListKey = { deliverAt: row.deliverAt, seq: 0, id: row.id };
        if (!inRange(query, key) || decodeRecord(row.record).topic !== query.topic) continue;
        const { id, deliverAt, attempts } = row;
        items.push({ message: { id, topic: query.topic, status, deliverAt, attempts }, key });
      }
      if (read < RECORDS_PER_READ) return { items, scanned };
    }
  }
}
