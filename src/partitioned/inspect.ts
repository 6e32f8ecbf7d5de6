/**
 * Read-only views of a partitioned queue: counts, dead letters, due times, payloads, owners,
 * pages. Any node answers from the store alone, each partition asked separately and all at
 * once (the counts a few at a time, counts-reads.ts); none walks over messages except dead
 * letters (up to the limit) and list() (by page).
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
import { CountsReads, statusOf, type QueueCounts } from './counts-reads.js';
import { windowOfSegment, type At, type PartitionDriver } from './driver.js';
import { decodeRecord, placeOf } from './record.js';

interface SegmentPart {
  items: Array<{ message: MessageInfo; key: ListKey }>;
  scanned: number;
}

/** Records a partition's page reads at most before it stops at a window's start. */
const PARTITION_SCAN_RECORDS = 8_192;
const RECORDS_PER_READ = 1_000;
const WINDOWS_PER_READ = 16;

export class PartitionInspector {
  private readonly countsReads: CountsReads;

  constructor(
    private readonly driver: PartitionDriver,
    private readonly partitions: number,
    private readonly windowMs: number,
  ) {
    this.countsReads = new CountsReads(driver, partitions);
  }

  /** The same read of every partition, in partition order. */
  private each<T>(read: (partition: number) => Promise<T>): Promise<T[]> {
    return Promise.all(Array.from({ length: this.partitions }, (_, p) => read(p)));
  }

  /** Live messages of the whole queue per topic and status, and their totals (counts-reads.ts). */
  counts(): Promise<QueueCounts> {
    return this.countsReads.read();
  }

  /** Live messages of one topic by status, each partition asked for that topic only. */
  async topicCounts(topic: string): Promise<TopicCounts> {
    const of: TopicCounts = { scheduled: 0, ready: 0, inflight: 0, dead: 0 };
    for (const counts of await this.each((p) => this.driver.topicCounts(p, topic))) {
      for (const [letter, n] of Object.entries(counts)) {
        const status = statusOf(letter);
        if (status !== undefined) of[status] += n;
      }
    }
    return of;
  }

  /** Which node holds each partition's lease now ('' for none, or one that ran out). */
  async owners(): Promise<string[]> {
    const holders = await this.driver.leaseHolders(this.partitions);
    const now = Date.now();
    // A lease's end is by the store's clock: for display, a skew shows a lease a little off.
    return holders.map(({ owner, until }) => (owner !== '' && until > now - 1_000 ? owner : ''));
  }

  /**
   * Dead messages of `topic` over every partition, oldest first: each partition's are in the
   * order of its store's time of death, so partitions on different servers are merged by their
   * servers' clocks.
   */
  async deadLetters(topic: string, limit: number): Promise<MessageInfo[]> {
    const replies = await this.each((p) => this.driver.dead(p, topic, limit));
    const oldest = replies.flat().sort((a, b) => a.died - b.died);
    const found = await Promise.all(oldest.slice(0, limit).map(({ id }) => this.info(id)));
    return found.filter((info): info is MessageInfo => info?.status === 'dead');
  }

  /** A message's state with the reason its latest delivery failed. */
  async info(id: string): Promise<MessageInfo | undefined> {
    const at = this.at(id);
    const [info, [reason]] = await Promise.all([
      this.driver.get(at),
      this.driver.reasons(at.partition, [id]),
    ]);
    if (info !== undefined && reason !== undefined && reason !== '') info.lastError = reason;
    return info;
  }

  private at(id: string): At {
    return { id, ...placeOf(id, this.partitions) };
  }

  /** The payload of a live or dead message, decoded as receive() would. */
  async payload(id: string): Promise<{ value: unknown } | undefined> {
    const found = await this.driver.stored(this.at(id));
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
    const [sizes, loaded, { scheduled: scheduledOf }] = await Promise.all([
      this.each((p) => this.driver.segmentSizes(p)),
      this.each((p) => this.driver.loadedUntil(p)),
      this.counts(),
    ]);
    const histogram = new Array<number>(edgesMs.length + 1).fill(0);
    const add = (dueIn: number, n: number) => {
      let i = 0;
      while (i < edgesMs.length && dueIn >= edgesMs[i]) i++;
      histogram[i] += n;
    };
    for (let p = 0; p < this.partitions; p++) {
      const loadedUntil = loaded[p];
      const scheduled = scheduledOf[p];
      let far = 0;
      for (const [seg, n] of Object.entries(sizes[p])) {
        if (seg[0] !== 'w') continue;
        const start = windowOfSegment(Number(seg.slice(1))) * this.windowMs;
        // Windows wholly past the loaded horizon hold only scheduled messages.
        if (start < loadedUntil) continue;
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

  /** Sets each message's lastError as info() does: one read of reasons per partition. */
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
        const ids = those.map((message) => message.id);
        const reasons = await this.driver.reasons(partition, ids);
        those.forEach((message, i) => {
          const reason = reasons[i];
          if (reason !== undefined && reason !== '') message.lastError = reason;
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
    const { driver, windowMs } = this;
    const found = new SmallestKeys<MessageInfo>(query.limit + 1);
    let scanned = 0;
    let matched = 0;
    const take = (segment: SegmentPart) => {
      scanned += segment.scanned;
      matched += segment.items.length;
      for (const { message, key } of segment.items) found.push(message, key);
    };

    const lo = Math.max(query.from, query.after?.deliverAt ?? -Infinity);
    const [segments, loadedUntil] = await Promise.all([
      driver.nearSegments(partition),
      driver.loadedUntil(partition),
    ]);
    // Near segments hold messages due before loadedUntil: a page starting after it skips them.
    const near = lo > loadedUntil ? [] : segments;
    (await Promise.all(near.map((seg) => this.readSegment(partition, seg, query)))).forEach(take);

    let from = Number.isFinite(lo) ? Math.floor(lo / windowMs) : -Infinity;
    let through: ListKey | undefined;
    let windowsRead = 0;
    scan: for (;;) {
      const windows = await driver.windows(partition, from, Infinity, WINDOWS_PER_READ);
      if (windows.length === 0) break;
      const starts = windows.map((segment) => windowOfSegment(segment) * windowMs);
      // Read together (pipelined), taken in window order.
      const reads = windows.map((segment, i) =>
        starts[i] < query.until ? this.readSegment(partition, `w${segment}`, query) : undefined,
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
      from = windowOfSegment(windows[windows.length - 1]) + 1;
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

  private async readSegment(
    partition: number,
    seg: string,
    query: ListQuery,
  ): Promise<SegmentPart> {
    const items: SegmentPart['items'] = [];
    let scanned = 0;
    for (let from = 0; ; from += RECORDS_PER_READ) {
      const { scanned: read, live } = await this.driver.read(
        partition,
        seg,
        from,
        RECORDS_PER_READ,
      );
      scanned += read;
      for (const row of live) {
        const status = statusOf(row.status);
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
