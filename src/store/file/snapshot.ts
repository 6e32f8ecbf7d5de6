/**
 * snapshot.bin: the tables after every record before one log position P, so recovery replays
 * only from P; replaced whole (via `.tmp`, fsynced, renamed, directory synced). Little-endian,
 * typed arrays as they are in memory (so little-endian hosts only):
 *
 *   magic "TWSNAPSH" (8 bytes) | version u32 | meta length u32 | meta: JSON, ASCII
 *   zero bytes up to a multiple of 8
 *   IdTable slots, capacity x (hash low u32 | hash high u32 | value f64)
 *   near positions f64[nearCount]
 *   CRC-32 u32 of every byte before it
 *
 * A file cut short, longer than its meta says, or failing its CRC is rejected whole.
 */

import { open, rename, rm, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import { TickwheelError } from '../../errors.js';
import { LITTLE_ENDIAN } from '../bytes.js';
import type { CountEntries } from '../counts.js';
import type { IdTableArrays } from './id-table.js';
import { DATA_FILE_MODE, ifExists, readFully, syncDirectory, writeFully } from '../log/index.js';

export const SNAPSHOT_FILE = 'snapshot.bin';
/** 3: dead letters with their rank (an older snapshot is rejected: the log is replayed). */
export const SNAPSHOT_VERSION = 3;

const MAGIC = Buffer.from('TWSNAPSH', 'latin1');
const HEADER_BYTES = 16;
/** Writes and reads go in pieces of this size, so the event loop runs between them. */
const CHUNK_BYTES = 8 * 1024 * 1024;

/** Typed arrays are written as they are in memory: only where that means little-endian. */
export const snapshotsSupported = LITTLE_ENDIAN;

export interface StoreSnapshot {
  /** Log position P: the tables are those after every record before P, and no other. */
  position: number;
  /** Every live message due before this had been handed to the queue. */
  frontier: number;
  windowMs: number;
  ids: IdTableArrays;
  collisions: Array<[id: string, position: number, deliverAt: number]>;
  /** rank: the position that orders it among dead letters (its BURY's, carried by compaction). */
  dead: Array<[id: string, position: number, payloadPosition: number, topic: string, rank: number]>;
  segmentLive: Array<[segment: number, live: number]>;
  counts: CountEntries;
  /** Latest-record positions of the live messages the queue held in memory (no index entry). */
  near: Float64Array;
  /** Index windows whose entries had all been handed over (their files may still exist). */
  loaded: string[];
}

type Meta = Omit<StoreSnapshot, 'ids' | 'counts' | 'near'> &
  Omit<CountEntries, 'minutes'> & {
    capacity: number;
    live: number;
    deleted: number;
    nearCount: number;
    /** Absent from snapshots of versions that counted by the hour only. */
    minutes?: CountEntries['minutes'];
  };

/** A snapshot file that cannot be used; `reason` says why. */
export class SnapshotRejected extends TickwheelError<'ERR_TICKWHEEL_SNAPSHOT_REJECTED'> {
  constructor(readonly reason: string) {
    super('ERR_TICKWHEEL_SNAPSHOT_REJECTED', `snapshot rejected: ${reason}`);
    this.name = 'SnapshotRejected';
  }
}

function view(array: Uint32Array | Float64Array): Buffer {
  return Buffer.from(array.buffer, array.byteOffset, array.byteLength);
}

function padding(metaBytes: number): number {
  return (8 - ((HEADER_BYTES + metaBytes) % 8)) % 8;
}

/** Writes a snapshot (its arrays straight from memory: copies); returns its size. */
export async function writeSnapshot(dir: string, snapshot: StoreSnapshot): Promise<number> {
  const { ids, near, counts, ...small } = snapshot;
  const meta: Meta = {
    ...small,
    ...counts,
    capacity: ids.slots.length / 2,
    live: ids.live,
    deleted: ids.deleted,
    nearCount: near.length,
  };
  const metaBytes = Buffer.from(JSON.stringify(meta), 'latin1');
  const head = Buffer.alloc(HEADER_BYTES + metaBytes.length + padding(metaBytes.length));
  MAGIC.copy(head, 0);
  head.writeUInt32LE(SNAPSHOT_VERSION, 8);
  head.writeUInt32LE(metaBytes.length, 12);
  metaBytes.copy(head, HEADER_BYTES);

  const file = join(dir, SNAPSHOT_FILE);
  const temp = `${file}.tmp`;
  const handle = await open(temp, 'w', DATA_FILE_MODE);
  let at = 0;
  let crc = 0;
  try {
    for (const part of [head, view(ids.slots), view(near)]) {
      for (let from = 0; from < part.length; from += CHUNK_BYTES) {
        const chunk = part.subarray(from, Math.min(part.length, from + CHUNK_BYTES));
        crc = crc32(chunk, crc);
        await writeFully(handle, chunk, at);
        at += chunk.length;
      }
    }
    const trailer = Buffer.alloc(4);
    trailer.writeUInt32LE(crc, 0);
    await writeFully(handle, trailer, at);
    at += 4;
    await handle.sync();
  } catch (err) {
    await handle.close().catch(() => undefined);
    await rm(temp, { force: true });
    throw err;
  }
  await handle.close();
  await rename(temp, file);
  await syncDirectory(dir);
  return at;
}

/** The snapshot, or undefined if none; SnapshotRejected if damaged or of another version. */
export async function readSnapshot(
  dir: string,
): Promise<{ snapshot: StoreSnapshot; bytes: number } | undefined> {
  const handle = await ifExists(open(join(dir, SNAPSHOT_FILE), 'r'));
  if (handle === undefined) return undefined;
  try {
    if (!snapshotsSupported) throw new SnapshotRejected('this host is not little-endian');
    const { size } = await handle.stat();
    if (size < HEADER_BYTES + 4) throw new SnapshotRejected(`only ${size} bytes`);
    const head = Buffer.alloc(HEADER_BYTES);
    await readWhole(handle, head, 0);
    if (!head.subarray(0, 8).equals(MAGIC)) throw new SnapshotRejected('not a snapshot file');
    const version = head.readUInt32LE(8);
    if (version !== SNAPSHOT_VERSION) {
      throw new SnapshotRejected(
        `snapshot version ${version}, this tickwheel reads ${SNAPSHOT_VERSION}`,
      );
    }
    const metaLength = head.readUInt32LE(12);
    if (HEADER_BYTES + metaLength + 4 > size) throw new SnapshotRejected('cut short');
    const metaBytes = Buffer.alloc(metaLength + padding(metaLength));
    await readWhole(handle, metaBytes, HEADER_BYTES);
    let meta: Meta;
    try {
      meta = JSON.parse(metaBytes.toString('latin1', 0, metaLength)) as Meta;
    } catch {
      throw new SnapshotRejected('its table of contents is not readable');
    }
    const { capacity, nearCount, minutes, live, deleted, topics, hours, ...tables } = meta;
    if (!isCount(capacity) || !isCount(nearCount) || capacity < 16) {
      throw new SnapshotRejected('its table of contents is damaged');
    }
    // Minutes cannot be told from hours: the log, replayed whole, counts them again.
    if (minutes === undefined) throw new SnapshotRejected('it counts due times by the hour only');
    const expected = HEADER_BYTES + metaBytes.length + capacity * 16 + nearCount * 8 + 4;
    if (size !== expected) {
      throw new SnapshotRejected(`${size} bytes where its contents need ${expected}`);
    }
    const ids = { slots: new Float64Array(capacity * 2), live, deleted };
    const near = new Float64Array(nearCount);
    let crc = crc32(metaBytes, crc32(head));
    let at = HEADER_BYTES + metaBytes.length;
    for (const part of [view(ids.slots), view(near)]) {
      for (let from = 0; from < part.length; from += CHUNK_BYTES) {
        const chunk = part.subarray(from, Math.min(part.length, from + CHUNK_BYTES));
        await readWhole(handle, chunk, at);
        crc = crc32(chunk, crc);
        at += chunk.length;
      }
    }
    const trailer = Buffer.alloc(4);
    await readWhole(handle, trailer, at);
    if (trailer.readUInt32LE(0) !== crc) throw new SnapshotRejected('CRC mismatch');
    const counts = { topics, minutes, hours };
    const loaded = tables.loaded.map(String);
    return { snapshot: { ...tables, ids, counts, near, loaded }, bytes: size };
  } finally {
    await handle.close().catch(() => undefined);
  }
}

export async function removeSnapshot(dir: string): Promise<void> {
  await rm(join(dir, SNAPSHOT_FILE), { force: true });
  await syncDirectory(dir);
}

/** Removes what a crash while writing a snapshot left: never read, only in the way. */
export async function removeSnapshotTemp(dir: string): Promise<void> {
  await rm(join(dir, `${SNAPSHOT_FILE}.tmp`), { force: true });
}

/** A safe non-negative integer (what a damaged JSON file may not hold). */
export function isCount(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) >= 0;
}

async function readWhole(handle: FileHandle, buffer: Buffer, position: number): Promise<void> {
  const read = await readFully(handle, buffer, 0, buffer.length, position);
  if (read < buffer.length) throw new SnapshotRejected('cut short');
}
