/**
 * list() on Valkey/Redis (docs/cluster.md, "Differences from the embedded queue"): read-only,
 * through tw_read. Every live message has its current record in a segment: a window segment
 * `w<n>` holds only messages due in window n, the near segments `n<k>` a horizon's worth. So a
 * partition's page reads its near segments whole, then its window segments in order from the
 * page's start, each whole (records are in schedule order, not due order), and stops before
 * the next window once it has the page or has read PARTITION_SCAN_RECORDS records: it is then
 * complete up to that window's start. A merged page ends where the first partition stopped.
 */

import type { MessageStatus } from '../protocol/model.js';
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
import type { MessageInfo } from '../queue/types.js';
import type { Valkey } from '../valkey/connection.js';
import * as tw from './functions.js';
import { metaKey, partitionPrefix } from './keys.js';
import { decodeRecord, placeOf } from './record.js';

/** Records a partition's page reads at most before it stops at a window's start. */
const PARTITION_SCAN_RECORDS = 8_192;
/** Records asked of tw_read at once. */
const RECORDS_PER_READ = 1_000;
/** Window numbers asked of the `windows` sorted set at once. */
const WINDOWS_PER_READ = 16;

const STATUSES: Record<string, MessageStatus> = { S: 'scheduled', R: 'ready', I: 'inflight' };

export async function listPartitions(
  valkey: Valkey,
  queue: string,
  partitions: number,
  windowMs: number,
  query: ListQuery,
): Promise<BackendListPage> {
  const parts = await Promise.all(
    Array.from({ length: partitions }, (_, p) => listPartition(valkey, queue, p, windowMs, query)),
  );
  const page = mergePages(query.limit, parts);
  const messages = page.items.map(({ message }) => message);
  await addReasons(valkey, queue, partitions, messages);
  return { messages, next: page.through };
}

/** Sets each message's lastError as get() does: one HMGET of `reasons` per partition. */
async function addReasons(
  valkey: Valkey,
  queue: string,
  partitions: number,
  messages: MessageInfo[],
): Promise<void> {
  const byPartition = new Map<number, MessageInfo[]>();
  for (const message of messages) {
    const { partition } = placeOf(message.id, partitions);
    let those = byPartition.get(partition);
    if (those === undefined) byPartition.set(partition, (those = []));
    those.push(message);
  }
  await Promise.all(
    [...byPartition].map(async ([partition, those]) => {
      const key = `${partitionPrefix(queue, partition)}reasons`;
      const ids = those.map((message) => message.id);
      const reasons = (await valkey.command(key, ['HMGET', key, ...ids], true)) as unknown[];
      those.forEach((message, i) => {
        const reason = reasons[i];
        if (typeof reason === 'string' && reason !== '') message.lastError = reason;
      });
    }),
  );
}

async function listPartition(
  valkey: Valkey,
  queue: string,
  partition: number,
  windowMs: number,
  query: ListQuery,
): Promise<KeyedPart<MessageInfo>> {
  const meta = metaKey(queue, partition);
  const prefix = partitionPrefix(queue, partition);
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
  for (const segment of await Promise.all(
    near.map((seg) => readSegment(valkey, meta, seg, query)),
  )) {
    take(segment);
  }

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
      starts[i] < query.until ? readSegment(valkey, meta, `w${window}`, query) : undefined,
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

interface SegmentPart {
  items: Array<{ message: MessageInfo; key: ListKey }>;
  scanned: number;
}

async function readSegment(
  valkey: Valkey,
  meta: string,
  seg: string,
  query: ListQuery,
): Promise<SegmentPart> {
  const items: SegmentPart['items'] = [];
  let scanned = 0;
  for (let from = 0; ; from += RECORDS_PER_READ) {
    const { scanned: read, live } = await tw.read(valkey, meta, seg, from, RECORDS_PER_READ);
    scanned += read;
    for (const row of live) {
      const status = STATUSES[row.status];
      if (status === undefined) continue; // dead
      const key: ListKey = { deliverAt: row.deliverAt, seq: 0, id: row.id };
      if (!inRange(query, key) || decodeRecord(row.record).topic !== query.topic) continue;
      const { id, deliverAt, attempts } = row;
      items.push({ message: { id, topic: query.topic, status, deliverAt, attempts }, key });
    }
    if (read < RECORDS_PER_READ) return { items, scanned };
  }
}
