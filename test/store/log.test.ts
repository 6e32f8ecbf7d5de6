import { afterEach, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { readFile, readdir, stat, writeFile } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import {
  TickwheelCorruptError,
  TickwheelUnavailableError,
  type TickwheelErrorCode,
} from '../../src/errors.js';
import {
  LogError,
  MessageLog,
  RECORD_HEADER_BYTES as HEADER,
  SEGMENT_SPAN,
  segmentOf,
  segmentFileName,
  writeFully,
  type LogFailure,
  type LogIo,
  type MessageLogOptions,
  type ReplayOptions,
  type ReplayReport,
} from '../../src/store/log/index.js';
import { seededBytes } from '../support/random.mjs';
import { useTempDirs } from '../support/temp-dir.js';
import { waitFor } from '../support/wait-for.js';

interface Rec {
  type: number;
  body: Buffer;
  position: number;
}

const tempDir = useTempDirs('log');
const logs: MessageLog[] = [];

afterEach(async () => {
  await Promise.all(logs.splice(0).map((log) => log.close().catch(() => {})));
});

async function openLog(options: MessageLogOptions): Promise<MessageLog> {
  const log = await MessageLog.open(options);
  logs.push(log);
  return log;
}

/** Appends `count` records (types and sizes varying with the index) and flushes. */
async function fill(
  log: MessageLog,
  count: number,
  sizeOf: (i: number) => number = (i) => (i * 37) % 200,
  seed = 0,
): Promise<Rec[]> {
  const records: Rec[] = [];
  for (let i = 0; i < count; i++) {
    const type = (seed + i) % 256;
    const body = seededBytes(seed + i, sizeOf(i));
    records.push({ type, body, position: log.append(type, body).position });
  }
  await log.flush();
  return records;
}

async function replayAll(
  options: MessageLogOptions,
  from?: number,
  replayOptions?: ReplayOptions,
): Promise<{ log: MessageLog; got: Rec[]; report: ReplayReport }> {
  const log = await openLog(options);
  const got: Rec[] = [];
  const report = await log.replay(
    (type, body, position) => got.push({ type, body, position }),
    from,
    replayOptions,
  );
  return { log, got, report };
}

/**
 * Records with their bodies as base64 text. Compare large records this way: toEqual walks a
 * Buffer byte by byte, which takes seconds per megabyte.
 */
function view(records: Rec[]): Array<{ type: number; body: string; position: number }> {
  return records.map(({ type, body, position }) => ({
    type,
    body: body.toString('base64'),
    position,
  }));
}

function offsetOf(position: number): number {
  return position % SEGMENT_SPAN;
}

function sizeOf(record: Rec): number {
  return HEADER + record.body.length;
}

async function segmentBytes(dir: string, segment: number): Promise<Buffer> {
  return readFile(join(dir, segmentFileName(segment)));
}

/** Applies `change` to the bytes of one segment file. */
async function damage(dir: string, segment: number, change: (bytes: Buffer) => Buffer | void) {
  const file = join(dir, segmentFileName(segment));
  const bytes = await readFile(file);
  await writeFile(file, change(bytes) ?? bytes);
}

/** The one class each code of the log's errors has: damage, the disk, or the log's own rules. */
function classOf(code: TickwheelErrorCode): new (...args: never[]) => Error {
  if (code === 'ERR_TICKWHEEL_CORRUPT') return TickwheelCorruptError;
  if (code === 'ERR_TICKWHEEL_IO' || code === 'ERR_TICKWHEEL_LOCK_LOST') {
    return TickwheelUnavailableError;
  }
  return LogError;
}

function logFailure(error: unknown): LogFailure {
  const code = (error as { code: TickwheelErrorCode }).code;
  expect(error).toBeInstanceOf(classOf(code));
  return error as LogFailure;
}

async function rejection(promise: Promise<unknown>): Promise<LogFailure> {
  try {
    await promise;
  } catch (error) {
    return logFailure(error);
  }
  throw new Error('expected a rejection');
}

function thrown(fn: () => unknown): LogFailure {
  try {
    fn();
  } catch (error) {
    return logFailure(error);
  }
  throw new Error('expected a throw');
}

function enospc(): Error {
  return Object.assign(new Error('ENOSPC: no space left on device, write'), {
    code: 'ENOSPC',
    errno: -28,
  });
}

/** An fsync that takes at least `ms` longer than the disk needs. */
function slowSync(ms: number): LogIo['sync'] {
  return async (handle) => {
    await delay(ms);
    await handle.datasync();
  };
}

const realWrite: LogIo['write'] = async (handle, buffer, offset, length, position) =>
  (await handle.write(buffer, offset, length, position)).bytesWritten;

describe('record format', () => {
  it('writes exactly the documented bytes: magic, type, length, CRC of type + body, body', async () => {
    const dir = tempDir();
    const log = await openLog({ dir });
    const { position } = log.append(3, Buffer.from('hi'));
    await log.flush();
    expect(position).toBe(1 * SEGMENT_SPAN);
    expect(await readdir(dir)).toEqual(['0000000001.seg']);
    const documented = 'a7 03 02000000 185f4d64 6869'.replaceAll(' ', '');
    expect((await segmentBytes(dir, 1)).toString('hex')).toBe(documented);
  });

  it('creates its folder, parents included', async () => {
    const dir = join(tempDir(), 'data', 'log');
    const log = await openLog({ dir });
    expect(log.segments()).toEqual([1]);
    expect(log.end).toBe(SEGMENT_SPAN);
    expect((await stat(join(dir, '0000000001.seg'))).size).toBe(0);
  });

  it('validates its options with ERR_TICKWHEEL_INVALID_OPTION', async () => {
    const dir = tempDir();
    for (const bad of [
      { dir: '' },
      { dir, fsync: 'sometimes' as never },
      { dir, segmentBytes: 0 },
      { dir, segmentBytes: 1.5 },
      { dir, segmentBytes: 2 ** 32 },
      { dir, maxRecordBytes: -1 },
      { dir, maxRecordBytes: 2 ** 31 },
    ]) {
      expect((await rejection(MessageLog.open(bad))).code).toBe('ERR_TICKWHEEL_INVALID_OPTION');
    }
  });
});

describe('appending and reading', () => {
  it('round-trips many records across several segments, in order', async () => {
    const dir = tempDir();
    const log = await openLog({ dir, segmentBytes: 4096 });
    const records = await fill(log, 2000);
    expect(log.segments().length).toBeGreaterThan(10);
    await log.close();

    const { got, report } = await replayAll({ dir, segmentBytes: 4096 });
    expect(view(got)).toEqual(view(records));
    expect(report).toEqual({
      records: 2000,
      corrupt: [],
      truncatedBytes: 0,
      end: records[1999].position + sizeOf(records[1999]),
    });
  });

  it('assigns increasing positions; segmentOf names the segment file holding each record', async () => {
    const dir = tempDir();
    const segmentBytesOption = 1000;
    const log = await openLog({ dir, segmentBytes: segmentBytesOption });
    const records = await fill(log, 300, (i) => (i * 53) % 300);
    for (let i = 1; i < records.length; i++) {
      expect(records[i].position).toBeGreaterThan(records[i - 1].position);
    }
    for (const record of records) {
      const segment = segmentOf(record.position);
      const offset = offsetOf(record.position);
      expect(segment * SEGMENT_SPAN + offset).toBe(record.position);
      // A record never spans segments, and only a record alone in its segment may pass the size.
      if (offset > 0) expect(offset + sizeOf(record)).toBeLessThanOrEqual(segmentBytesOption);
      const file = await segmentBytes(dir, segment);
      expect(file.subarray(offset + HEADER, offset + sizeOf(record))).toEqual(record.body);
      expect(file[offset + 1]).toBe(record.type);
    }
    expect(log.segments()).toEqual([...new Set(records.map((r) => segmentOf(r.position)))]);
  });

  it('rolls over only when the next record would pass segmentBytes; an oversized record gets a segment of its own', async () => {
    const dir = tempDir();
    const log = await openLog({ dir, segmentBytes: 100 });
    const a = log.append(1, Buffer.alloc(30)).position; // 40 bytes
    const b = log.append(1, Buffer.alloc(50)).position; // 60 bytes: exactly 100
    const c = log.append(1, Buffer.alloc(0)).position; // would be 110: new segment
    const big = log.append(1, Buffer.alloc(500)).position; // too big for any segment
    const after = log.append(1, Buffer.alloc(0)).position;
    await log.flush();
    expect([a, b, c, big, after]).toEqual([
      1 * SEGMENT_SPAN,
      1 * SEGMENT_SPAN + 40,
      2 * SEGMENT_SPAN,
      3 * SEGMENT_SPAN,
      4 * SEGMENT_SPAN,
    ]);
    expect(log.segments()).toEqual([1, 2, 3, 4]);
    expect((await stat(join(dir, segmentFileName(3)))).size).toBe(510);
  });

  it('read() returns any record by position: staged, in flight, or on disk after a reopen', async () => {
    const dir = tempDir();
    const options = { dir, segmentBytes: 8192 };
    const log = await openLog(options);
    const records: Rec[] = [];
    for (let i = 0; i < 1000; i++) {
      const body = seededBytes(i, (i * 71) % 500);
      records.push({ type: i % 7, body, position: log.append(i % 7, body).position });
    }
    const pick = (n: number) => records[(n * 7919) % records.length];
    // Nothing has been written yet: these come from the staging buffer.
    for (let n = 0; n < 50; n++) {
      const record = pick(n);
      expect(await log.read(record.position)).toEqual({ type: record.type, body: record.body });
    }
    await log.flush();
    for (let n = 50; n < 100; n++) {
      const record = pick(n);
      expect(await log.read(record.position)).toEqual({ type: record.type, body: record.body });
    }
    await log.close();
    const reopened = await openLog(options);
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: records.length - 1 }), async (i) => {
        const got = await reopened.read(records[i].position);
        expect(got).toEqual({ type: records[i].type, body: records[i].body });
      }),
      { numRuns: 200 },
    );
    // Concurrent reads across segments share the cached read handles.
    const all = await Promise.all(records.map((r) => reopened.read(r.position)));
    expect(all.map((r) => r.body.toString('base64'))).toEqual(
      records.map((r) => r.body.toString('base64')),
    );
  });

  it('segmentSize() is the size of a segment in the log, staged records included', async () => {
    const log = await openLog({ dir: tempDir(), segmentBytes: 1000 });
    await fill(log, 25, () => 90);
    log.append(1, Buffer.alloc(40));
    expect(log.segments()).toEqual([1, 2, 3]);
    expect([1, 2, 3, 4].map((segment) => log.segmentSize(segment))).toEqual([
      1000,
      1000,
      500 + HEADER + 40,
      undefined,
    ]);
  });

  it('copies the body at append, so the caller may reuse its buffer', async () => {
    const log = await openLog({ dir: tempDir() });
    const body = Buffer.from('original');
    const { position } = log.append(9, body);
    body.write('CHANGED!');
    expect((await log.read(position)).body.toString()).toBe('original');
    await log.flush();
    expect((await log.read(position)).body.toString()).toBe('original');
  });

  it('handles records larger than the replay read window', async () => {
    const dir = tempDir();
    const log = await openLog({ dir });
    const records = await fill(log, 5, (i) => [3 << 20, 10, (1 << 20) + 7, 0, 2 << 20][i]);
    expect((await log.read(records[2].position)).body.equals(records[2].body)).toBe(true);
    await log.close();
    const { got, report } = await replayAll({ dir });
    expect(view(got)).toEqual(view(records));
    expect(report.corrupt).toEqual([]);
  });

  it('refuses bodies over maxRecordBytes with ERR_TICKWHEEL_RECORD_TOO_LARGE', async () => {
    const log = await openLog({ dir: tempDir(), maxRecordBytes: 100 });
    expect(thrown(() => log.append(1, new Uint8Array(101))).code).toBe(
      'ERR_TICKWHEEL_RECORD_TOO_LARGE',
    );
    const { durable } = log.append(1, new Uint8Array(100));
    await durable;
    expect(log.stats().appends).toBe(1);
  });

  it('refuses record types outside 0..255 and bodies that are not bytes (ERR_TICKWHEEL_INVALID_RECORD)', async () => {
    const log = await openLog({ dir: tempDir() });
    for (const type of [-1, 256, 1.5, Number.NaN]) {
      expect(thrown(() => log.append(type, new Uint8Array(1))).code).toBe(
        'ERR_TICKWHEEL_INVALID_RECORD',
      );
    }
    expect(thrown(() => log.append(1, 'text' as unknown as Uint8Array)).code).toBe(
      'ERR_TICKWHEEL_INVALID_RECORD',
    );
    await log.append(255, new Uint8Array(1)).durable;
  });

  it('read() refuses positions that hold no record', async () => {
    const log = await openLog({ dir: tempDir() });
    const [record] = await fill(log, 3, () => 20);
    expect((await rejection(log.read(record.position + 1))).code).toBe('ERR_TICKWHEEL_CORRUPT');
    expect((await rejection(log.read(log.end))).code).toBe('ERR_TICKWHEEL_INVALID_POSITION');
    expect((await rejection(log.read(7 * SEGMENT_SPAN))).code).toBe(
      'ERR_TICKWHEEL_INVALID_POSITION',
    );
    expect((await rejection(log.read(-1))).code).toBe('ERR_TICKWHEEL_INVALID_POSITION');
  });

  it('read() verifies the CRC: a damaged record on disk rejects with ERR_TICKWHEEL_CORRUPT', async () => {
    const dir = tempDir();
    const log = await openLog({ dir });
    const records = await fill(log, 3, () => 40);
    await damage(dir, 1, (bytes) => {
      bytes[offsetOf(records[1].position) + HEADER + 5] ^= 0x10;
    });
    const error = await rejection(log.read(records[1].position));
    expect(error.code).toBe('ERR_TICKWHEEL_CORRUPT');
    expect(error.message).toMatch(/CRC mismatch/);
    expect((await log.read(records[2].position)).body).toEqual(records[2].body);
  });
});

describe('readMany', () => {
  it('returns what read() returns for every position, in the order asked, across segments, sizes and staged records', async () => {
    const dir = tempDir();
    const log = await openLog({ dir, segmentBytes: 64 * 1024 });
    // Small records, records longer than the read-ahead, and some far apart in one segment.
    const records = await fill(log, 600, (i) => (i % 50 === 0 ? 9000 : (i * 37) % 300));
    const staged = log.append(7, Buffer.from('not written yet'));
    const wanted = [...records.map((r) => r.position), staged.position];
    // Shuffled, with repeats: results follow the order asked.
    const order = [...wanted.keys()].sort((a, b) => ((a * 7919) % 601) - ((b * 7919) % 601));
    order.push(0, 0, wanted.length - 1);
    const got = await log.readMany(order.map((i) => wanted[i]));
    for (let k = 0; k < order.length; k++) {
      const expected = await log.read(wanted[order[k]]);
      expect(got[k]).toEqual(expected);
    }
    await staged.durable;
  });

  it('puts the error for a damaged or missing record in its place; the others are read', async () => {
    const dir = tempDir();
    const log = await openLog({ dir });
    const records = await fill(log, 50, () => 40);
    await damage(dir, 1, (bytes) => {
      bytes[offsetOf(records[20].position) + HEADER + 5] ^= 0x10;
    });
    const positions = records.map((r) => r.position);
    positions.push(records[49].position + 1_000_000, 3); // beyond the segment; not a record
    const got = await log.readMany(positions);
    for (let i = 0; i < 50; i++) {
      if (i === 20) {
        expect(got[i]).toBeInstanceOf(TickwheelCorruptError);
        expect((got[i] as LogFailure).code).toBe('ERR_TICKWHEEL_CORRUPT');
      } else expect(got[i]).toEqual({ type: records[i].type, body: records[i].body });
    }
    expect(got[50]).toBeInstanceOf(LogError);
    expect((got[50] as LogFailure).code).toBe('ERR_TICKWHEEL_INVALID_POSITION');
    expect(got[51]).toBeInstanceOf(LogError);
  });
});

describe('durability policies', () => {
  it("'batch': 1000 concurrent appends complete with far fewer fsyncs than appends", async () => {
    const log = await openLog({ dir: tempDir(), fsync: 'batch' });
    const pending = [];
    for (let i = 0; i < 1000; i++) pending.push(log.append(1, seededBytes(i, 100)).durable);
    await Promise.all(pending);
    const stats = log.stats();
    expect(stats.appends).toBe(1000);
    expect(stats.fsyncs).toBeLessThan(stats.appends / 10);
    expect(stats.writes).toBeLessThan(stats.appends / 10);
  });

  it("'batch': appends made while an fsync is in flight share the next single write and fsync, and resolve only after it", async () => {
    let syncedUpTo = 0;
    const slowSync: LogIo['sync'] = async (handle) => {
      const { size } = await handle.stat();
      await delay(15);
      await handle.datasync();
      syncedUpTo = size;
    };
    const log = await openLog({ dir: tempDir(), fsync: 'batch', io: { sync: slowSync } });
    const checks: Promise<void>[] = [];
    for (let wave = 0; wave < 20; wave++) {
      for (let i = 0; i < 50; i++) {
        const { position, durable } = log.append(1, seededBytes(i, 60));
        const recordEnd = offsetOf(position) + HEADER + 60;
        checks.push(durable.then(() => expect(syncedUpTo).toBeGreaterThanOrEqual(recordEnd)));
      }
      await delay(3);
    }
    await Promise.all(checks);
    const stats = log.stats();
    expect(stats.fsyncs).toBeLessThan(stats.appends / 10);
    expect(stats.writes).toBe(stats.fsyncs);
    expect(stats.fsyncMsMax).toBeGreaterThanOrEqual(10);
    expect(stats.fsyncMsTotal).toBeGreaterThanOrEqual(stats.fsyncMsMax);
  });

  it("'always': one write and one fsync per record, acknowledged in order", async () => {
    const log = await openLog({ dir: tempDir(), fsync: 'always', segmentBytes: 2000 });
    const order: number[] = [];
    const pending = [];
    for (let i = 0; i < 200; i++) {
      pending.push(log.append(1, seededBytes(i, 50)).durable.then(() => order.push(i)));
    }
    await Promise.all(pending);
    expect(order).toEqual([...Array(200).keys()]);
    const stats = log.stats();
    expect(stats.fsyncs).toBe(200);
    expect(stats.writes).toBe(200);
    expect(stats.segments).toBeGreaterThan(1);
  });

  it("'never': no fsync; resolved once written, and a reopened log has everything", async () => {
    const dir = tempDir();
    const log = await openLog({ dir, fsync: 'never', segmentBytes: 3000 });
    const records = await fill(log, 500);
    expect(log.stats().fsyncs).toBe(0);
    await log.close();
    const { got } = await replayAll({ dir });
    expect(view(got)).toEqual(view(records));
  });

  it("'batch': a record committed later starts no write: it goes out with the next record committed, by itself soon after, or with flush()", async () => {
    const dir = tempDir();
    const log = await openLog({ dir, fsync: 'batch' });
    await log.append(1, seededBytes(0, 20)).durable;
    const later = (seed: number) => {
      const slot = log.reserve(5, 20);
      seededBytes(seed, 20).copy(slot.buf, slot.at);
      return offsetOf(slot.commitLater(20)) + HEADER + 20;
    };
    const fileSize = async () => (await stat(join(dir, segmentFileName(1)))).size;
    // Rides the next write another record starts: one write and one fsync for both.
    const first = later(1);
    await new Promise((resolve) => setImmediate(resolve));
    expect(log.stats().writes).toBe(1);
    await log.append(1, seededBytes(2, 20)).durable;
    expect(log.stats()).toMatchObject({ writes: 2, fsyncs: 2 });
    expect(await fileSize()).toBeGreaterThanOrEqual(first);
    // Nothing else comes: it is written by itself.
    const second = later(3);
    await waitFor(() => log.stats().fsyncs >= 3);
    expect(await fileSize()).toBe(second);
    // flush() does not wait for that.
    const third = later(4);
    await log.flush();
    expect(await fileSize()).toBe(third);
    await log.close();
    const { got } = await replayAll({ dir });
    expect(got.map((record) => record.type)).toEqual([1, 5, 1, 5, 5]);
  });

  it('flush() resolves only once everything appended before it is durable', async () => {
    const log = await openLog({
      dir: tempDir(),
      io: { sync: slowSync(10) },
    });
    let durableCount = 0;
    for (let i = 0; i < 100; i++) {
      void log.append(1, seededBytes(i, 10)).durable.then(() => durableCount++);
      if (i % 25 === 0) await delay(4);
    }
    await log.flush();
    expect(durableCount).toBe(100);
    await expect(log.flush()).resolves.toBeUndefined();
  });

  it.each(['batch', 'always', 'never'] as const)(
    "'%s': a record reserved and aborted appends nothing and leaves flush() and close() working",
    async (fsync) => {
      const dir = tempDir();
      const log = await openLog({ dir, fsync });
      const first = log.append(1, seededBytes(1, 20));
      await first.durable;
      // Aborted on a fresh stage (nothing else staged), and after a record in the same stage.
      log.reserve(1, 50).abort();
      await expect(log.flush()).resolves.toBeUndefined();
      const second = log.append(2, seededBytes(2, 20));
      const slot = log.reserve(1, 50);
      slot.abort();
      slot.abort(); // a second abort is a no-op
      expect(() => slot.commit(10)).toThrow(/without a matching reserve/);
      await second.durable;
      await log.close();
      const { got } = await replayAll({ dir });
      expect(got.map((r) => r.position)).toEqual([first.position, second.position]);
    },
  );

  it('close() flushes; afterwards append throws ERR_TICKWHEEL_CLOSED and other calls reject with it', async () => {
    const dir = tempDir();
    const log = await openLog({ dir });
    const records: Rec[] = [];
    for (let i = 0; i < 10; i++) {
      const body = seededBytes(i, 30);
      records.push({ type: 2, body, position: log.append(2, body).position });
    }
    await log.close();
    await log.close(); // idempotent
    expect(thrown(() => log.append(1, new Uint8Array(1))).code).toBe('ERR_TICKWHEEL_CLOSED');
    expect((await rejection(log.read(records[0].position))).code).toBe('ERR_TICKWHEEL_CLOSED');
    expect((await rejection(log.replay(() => {}))).code).toBe('ERR_TICKWHEEL_CLOSED');
    expect((await rejection(log.deleteSegment(1))).code).toBe('ERR_TICKWHEEL_CLOSED');
    const { got } = await replayAll({ dir });
    expect(view(got)).toEqual(view(records));
  });
});

describe('recovery', () => {
  it('reopen + replay returns every record in order, and appends continue after the last', async () => {
    const dir = tempDir();
    const options = { dir, segmentBytes: 5000 };
    const writer = await openLog(options);
    const first = await fill(writer, 400);
    await writer.close();
    const { log, got, report } = await replayAll(options);
    expect(view(got)).toEqual(view(first));
    expect(report.end).toBe(log.end);
    const second = await fill(log, 100, undefined, 1000);
    expect(second[0].position).toBe(report.end);
    await log.close();
    expect(view((await replayAll(options)).got)).toEqual(view([...first, ...second]));
  });

  it('replay(from) delivers the records from that position on', async () => {
    const dir = tempDir();
    const options = { dir, segmentBytes: 2000 };
    const writer = await openLog(options);
    const records = await fill(writer, 200);
    await writer.close();
    for (const start of [records[0], records[77], records[199]]) {
      const { log, got, report } = await replayAll(options, start.position);
      expect(view(got)).toEqual(view(records.slice(records.indexOf(start))));
      expect(report.records).toBe(got.length);
      await log.close();
    }
    const { got, report } = await replayAll(options, endOf(records));
    expect(view(got)).toEqual(view([]));
    expect(report.end).toBe(endOf(records));
  });

  it('refuses replay after an append (ERR_TICKWHEEL_INVALID_STATE)', async () => {
    const log = await openLog({ dir: tempDir() });
    log.append(1, new Uint8Array(1));
    expect((await rejection(log.replay(() => {}))).code).toBe('ERR_TICKWHEEL_INVALID_STATE');
  });

  it('refuses appends from inside a replay callback (ERR_TICKWHEEL_INVALID_STATE)', async () => {
    const dir = tempDir();
    const writer = await openLog({ dir });
    await fill(writer, 3);
    await writer.close();
    const log = await openLog({ dir });
    const codes: string[] = [];
    await log.replay(() => codes.push(thrown(() => log.append(1, new Uint8Array(1))).code));
    expect(codes).toEqual(Array(3).fill('ERR_TICKWHEEL_INVALID_STATE'));
    await log.append(1, new Uint8Array(1)).durable;
  });

  it('rejects a replay whose callback throws, with that error', async () => {
    const dir = tempDir();
    const writer = await openLog({ dir });
    await fill(writer, 3);
    await writer.close();
    const log = await openLog({ dir });
    const boom = new Error('store could not apply record');
    await expect(
      log.replay(() => {
        throw boom;
      }),
    ).rejects.toBe(boom);
  });

  describe('torn tail', () => {
    async function template(count: number) {
      const dir = tempDir();
      const log = await openLog({ dir });
      const records = await fill(log, count, (i) => 5 + ((i * 29) % 60));
      await log.close();
      return { records, bytes: await segmentBytes(dir, 1) };
    }

    /** A fresh log folder whose single segment holds `bytes`. */
    async function logWith(bytes: Buffer): Promise<string> {
      const dir = tempDir();
      await writeFile(join(dir, segmentFileName(1)), bytes);
      return dir;
    }

    it('cuts a record torn anywhere (mid-header or mid-body) back to the last good record, and appends continue there', async () => {
      const { records, bytes } = await template(30);
      await fc.assert(
        fc.asyncProperty(fc.integer({ min: 1, max: bytes.length - 1 }), async (cut) => {
          const dir = await logWith(bytes.subarray(0, cut));
          const whole = records.filter((r) => offsetOf(r.position) + sizeOf(r) <= cut);
          const goodEnd =
            whole.length === 0 ? 0 : offsetOf(whole.at(-1)!.position) + sizeOf(whole.at(-1)!);
          const { log, got, report } = await replayAll({ dir });
          expect(view(got)).toEqual(view(whole));
          expect(report.corrupt).toEqual([]);
          expect(report.truncatedBytes).toBe(cut - goodEnd);
          expect(report.end).toBe(SEGMENT_SPAN + goodEnd);
          expect((await stat(join(dir, segmentFileName(1)))).size).toBe(goodEnd);

          const { position, durable } = log.append(200, Buffer.from('after the tear'));
          await durable;
          expect(position).toBe(SEGMENT_SPAN + goodEnd);
          await log.close();
          const again = await replayAll({ dir });
          expect(again.got).toEqual([
            ...whole,
            { type: 200, body: Buffer.from('after the tear'), position },
          ]);
          expect(again.report.truncatedBytes).toBe(0);
          await again.log.close();
        }),
        { numRuns: 60 },
      );
    });

    it('cuts a header torn after 1..9 bytes', async () => {
      const { records, bytes } = await template(5);
      const last = records[4];
      for (let kept = 1; kept < HEADER; kept++) {
        const cut = offsetOf(last.position) + kept;
        const { got, report } = await replayAll({ dir: await logWith(bytes.subarray(0, cut)) });
        expect(view(got)).toEqual(view(records.slice(0, 4)));
        expect(report.truncatedBytes).toBe(kept);
      }
    });

    it('cuts garbage appended after the last record', async () => {
      const { records, bytes } = await template(10);
      await fc.assert(
        fc.asyncProperty(
          fc.oneof(
            fc.uint8Array({ minLength: 1, maxLength: 300 }),
            fc.integer({ min: 1, max: 5000 }).map((n) => new Uint8Array(n)),
            fc.constant(Uint8Array.of(0xa7, 1, 4, 0, 0, 0, 9, 9, 9, 9, 1, 2, 3, 4)),
          ),
          async (garbage) => {
            const dir = await logWith(Buffer.concat([bytes, garbage]));
            const { log, got, report } = await replayAll({ dir });
            expect(view(got)).toEqual(view(records));
            expect(report.corrupt).toEqual([]);
            expect(report.truncatedBytes).toBe(garbage.length);
            const { position, durable } = log.append(1, Buffer.from('next'));
            await durable;
            expect(position).toBe(SEGMENT_SPAN + bytes.length);
            await log.close();
          },
        ),
        { numRuns: 40 },
      );
    });

    it('treats a CRC mismatch in the very last record as a torn tail', async () => {
      const { records, bytes } = await template(8);
      const last = records[7];
      const damaged = Buffer.from(bytes);
      damaged[offsetOf(last.position) + HEADER] ^= 0xff;
      const { got, report } = await replayAll({ dir: await logWith(damaged) });
      expect(view(got)).toEqual(view(records.slice(0, 7)));
      expect(report.corrupt).toEqual([]);
      expect(report.truncatedBytes).toBe(sizeOf(last));
    });
  });

  describe('damage in bytes known to be durable (ReplayOptions.durable)', () => {
    async function template(count: number) {
      const dir = tempDir();
      const log = await openLog({ dir });
      const records = await fill(log, count, (i) => 5 + ((i * 29) % 60));
      await log.close();
      return { dir, records, bytes: await segmentBytes(dir, 1) };
    }

    it('a cut below the durable size is not a torn tail: reported as durable, nothing cut', async () => {
      const { dir, records, bytes } = await template(10);
      const last = records[9];
      const cut = offsetOf(last.position) + 4;
      await writeFile(join(dir, segmentFileName(1)), bytes.subarray(0, cut));
      const durable = new Map([[1, bytes.length]]);
      const { log, got, report } = await replayAll({ dir }, 0, { durable });
      expect(view(got)).toEqual(view(records.slice(0, 9)));
      expect(report.truncatedBytes).toBe(0);
      expect(report.corrupt).toEqual([
        {
          position: last.position,
          segment: 1,
          reason: expect.stringMatching(/header cut short.*no intact record follows/),
          bytes: 4,
          durable: true,
        },
      ]);
      await log.close();
      expect((await stat(join(dir, segmentFileName(1)))).size).toBe(cut);
    });

    it('a CRC mismatch in the last durable record: reported as durable, not cut; past the durable size it is a torn tail', async () => {
      const { dir, records, bytes } = await template(8);
      const last = records[7];
      const damaged = Buffer.from(bytes);
      damaged[offsetOf(last.position) + HEADER] ^= 0xff;
      await writeFile(join(dir, segmentFileName(1)), damaged);
      const durable = new Map([[1, offsetOf(last.position) + 1]]);
      const inside = await replayAll({ dir }, 0, { durable });
      expect(inside.report.corrupt.map((c) => [c.position, c.durable])).toEqual([
        [last.position, true],
      ]);
      expect(inside.report.truncatedBytes).toBe(0);
      await inside.log.close();
      expect((await stat(join(dir, segmentFileName(1)))).size).toBe(bytes.length);

      const past = await replayAll({ dir }, 0, {
        durable: new Map([[1, offsetOf(last.position)]]),
      });
      expect(past.report.corrupt).toEqual([]);
      expect(past.report.truncatedBytes).toBe(sizeOf(last));
      await past.log.close();
      expect((await stat(join(dir, segmentFileName(1)))).size).toBe(offsetOf(last.position));
    });

    it('readOnly reports a torn tail without cutting it; cutDurable cuts durable damage at the end', async () => {
      const { dir, records, bytes } = await template(6);
      const last = records[5];
      const cut = offsetOf(last.position) + HEADER + 1;
      await writeFile(join(dir, segmentFileName(1)), bytes.subarray(0, cut));
      const planned = await replayAll({ dir }, 0, { readOnly: true });
      expect(planned.report.truncatedBytes).toBe(HEADER + 1);
      await planned.log.close();
      expect((await stat(join(dir, segmentFileName(1)))).size).toBe(cut);

      const durable = new Map([[1, bytes.length]]);
      const repaired = await replayAll({ dir }, 0, { durable, cutDurable: true });
      expect(repaired.report.corrupt.map((c) => [c.position, c.durable])).toEqual([
        [last.position, true],
      ]);
      expect(repaired.report.end).toBe(last.position);
      await repaired.log.close();
      expect((await stat(join(dir, segmentFileName(1)))).size).toBe(offsetOf(last.position));
    });

    it("syncAll() fsyncs under 'never' each segment written since the last call, once", async () => {
      const dir = tempDir();
      const synced: string[] = [];
      const log = await openLog({
        dir,
        fsync: 'never',
        segmentBytes: 100,
        io: {
          sync: async (handle) => {
            synced.push(String(handle.fd));
            await handle.datasync();
          },
        },
      });
      await fill(log, 6, () => 40);
      expect(log.segments()).toEqual([1, 2, 3]);
      expect(synced).toEqual([]);
      await log.syncAll();
      expect(synced).toHaveLength(3);
      expect(log.stats().fsyncs).toBe(3);
      await log.syncAll();
      expect(synced).toHaveLength(3);
      await fill(log, 1, () => 40);
      await log.syncAll();
      expect(synced).toHaveLength(4);
    });
  });

  describe('damage inside a segment', () => {
    async function build(options: { segmentBytes?: number; count: number; size: number }) {
      const dir = tempDir();
      const log = await openLog({ dir, segmentBytes: options.segmentBytes });
      const records = await fill(log, options.count, () => options.size);
      await log.close();
      return { dir, records };
    }

    it('flipping any byte of a middle record reports exactly that record; all others survive', async () => {
      const { dir, records } = await build({ count: 20, size: 30 });
      const original = await segmentBytes(dir, 1);
      const victim = records[10];
      for (let i = 0; i < sizeOf(victim); i++) {
        const flipped = Buffer.from(original);
        flipped[offsetOf(victim.position) + i] ^= 1 << (i % 8);
        await writeFile(join(dir, segmentFileName(1)), flipped);
        const { log, got, report } = await replayAll({ dir });
        expect(report.corrupt).toEqual([
          {
            position: victim.position,
            segment: 1,
            reason: expect.any(String),
            bytes: sizeOf(victim),
            durable: false,
          },
        ]);
        expect(view(got)).toEqual(view(records.filter((r) => r !== victim)));
        expect(report.truncatedBytes).toBe(0);
        expect(report.end).toBe(records[19].position + sizeOf(records[19]));
        await log.close();
      }
    });

    it('a damaged length field resynchronises at the next record', async () => {
      const { dir, records } = await build({ count: 12, size: 40 });
      const original = await segmentBytes(dir, 1);
      const victim = records[5];
      for (const length of [0, 1, 39, 41, 1000, 0xffffffff]) {
        const damaged = Buffer.from(original);
        damaged.writeUInt32LE(length, offsetOf(victim.position) + 2);
        await writeFile(join(dir, segmentFileName(1)), damaged);
        const { log, got, report } = await replayAll({ dir });
        expect(report.corrupt.map((c) => [c.position, c.bytes])).toEqual([
          [victim.position, sizeOf(victim)],
        ]);
        expect(view(got)).toEqual(view(records.filter((r) => r !== victim)));
        await log.close();
      }
    });

    it('damage in a closed segment is reported, not truncated, and later segments survive', async () => {
      const { dir, records } = await build({ segmentBytes: 500, count: 40, size: 40 });
      expect(segmentOf(records[39].position)).toBeGreaterThan(2);
      const inFirst = records.filter((r) => segmentOf(r.position) === 1);
      const middle = inFirst[3];
      const lastOfFirst = inFirst.at(-1)!;
      const sizeBefore = (await stat(join(dir, segmentFileName(1)))).size;
      await damage(dir, 1, (bytes) => {
        bytes[offsetOf(middle.position) + 12] ^= 0x40;
        bytes[offsetOf(lastOfFirst.position) + 12] ^= 0x40;
      });
      const { got, report } = await replayAll({ dir, segmentBytes: 500 });
      expect(report.corrupt.map((c) => [c.position, c.segment])).toEqual([
        [middle.position, 1],
        [lastOfFirst.position, 1],
      ]);
      expect(report.corrupt[1].reason).toMatch(/no intact record follows/);
      expect(report.truncatedBytes).toBe(0);
      expect(view(got)).toEqual(view(records.filter((r) => r !== middle && r !== lastOfFirst)));
      expect((await stat(join(dir, segmentFileName(1)))).size).toBe(sizeBefore);
    });

    it('resynchronises across the boundaries of replay read windows', async () => {
      const { dir, records } = await build({ count: 3500, size: 990 });
      const straddling = [1 << 20, 2 << 20, 3 << 20].map((boundary) =>
        records.find(
          (r) => offsetOf(r.position) < boundary && offsetOf(r.position) + 1000 > boundary,
        )!,
      );
      await damage(dir, 1, (bytes) => {
        for (const r of straddling) bytes[offsetOf(r.position) + 2] ^= 0x08; // length field
      });
      const { got, report } = await replayAll({ dir });
      expect(report.corrupt.map((c) => c.position)).toEqual(straddling.map((r) => r.position));
      expect(got.length).toBe(records.length - 3);
      expect(view(got)).toEqual(view(records.filter((r) => !straddling.includes(r))));
    });
  });
});

describe('I/O failures', () => {
  /** A write function that, when armed, writes half of what it is given and then fails. */
  function faultyWrite() {
    const control = { armed: false };
    const write: LogIo['write'] = async (handle, buffer, offset, length, position) => {
      if (!control.armed) return realWrite(handle, buffer, offset, length, position);
      control.armed = false;
      await realWrite(handle, buffer, offset, length >> 1, position);
      throw enospc();
    };
    return { control, write };
  }

  it('a failed write rejects the affected records with ERR_TICKWHEEL_IO, cuts the segment back, and later appends work', async () => {
    const dir = tempDir();
    const { control, write } = faultyWrite();
    const log = await openLog({ dir, io: { write } });
    const before = await fill(log, 10, () => 50);
    const goodSize = (await stat(join(dir, segmentFileName(1)))).size;

    control.armed = true;
    const failed = [];
    for (let i = 0; i < 5; i++) failed.push(log.append(7, seededBytes(100 + i, 80)));
    for (const { durable } of failed) {
      const error = await rejection(durable);
      expect(error.code).toBe('ERR_TICKWHEEL_IO');
      expect(error.message).toMatch(/ENOSPC/);
      expect(error.message).toMatch(/writing to segment 0000000001\.seg/);
    }
    expect((await stat(join(dir, segmentFileName(1)))).size).toBe(goodSize);
    expect(log.end).toBe(failed[0].position);
    expect(log.stats().failures).toBe(1);
    await expect(log.read(failed[0].position)).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_POSITION',
    });

    const after = await fill(log, 3, () => 20, 500);
    expect(after[0].position).toBe(failed[0].position); // the failed positions are reused
    await log.close();
    const { got, report } = await replayAll({ dir });
    expect(view(got)).toEqual(view([...before, ...after]));
    expect(report.corrupt).toEqual([]);
    expect(report.truncatedBytes).toBe(0);
  });

  it('a failed fsync rejects its batch and every record staged behind it; earlier records are kept', async () => {
    const dir = tempDir();
    // The failing fsync waits at a gate, so the test can stage records behind it.
    let failNext = false;
    let entered!: () => void;
    let release!: () => void;
    const syncing = new Promise<void>((resolve) => (entered = resolve));
    const gate = new Promise<void>((resolve) => (release = resolve));
    const sync: LogIo['sync'] = async (handle) => {
      if (!failNext) return handle.datasync();
      failNext = false;
      entered();
      await gate;
      throw Object.assign(new Error('EIO: i/o error, fsync'), { code: 'EIO' });
    };
    const log = await openLog({ dir, segmentBytes: 400, io: { sync } });
    const before = await fill(log, 5, () => 30);
    failNext = true;
    const inFlight = log.append(1, seededBytes(1, 30));
    await syncing;
    const staged = [];
    for (let i = 0; i < 20; i++) staged.push(log.append(1, seededBytes(i, 30))); // rolls a segment
    expect(log.segments().length).toBeGreaterThan(1);
    release();
    for (const { durable } of [inFlight, ...staged]) {
      const error = await rejection(durable);
      expect(error.code).toBe('ERR_TICKWHEEL_IO');
      expect(error.message).toMatch(/fsync of segment 0000000001\.seg failed: EIO/);
    }
    expect(log.segments()).toEqual([1]);
    expect(log.end).toBe(inFlight.position);
    const after = await fill(log, 3, () => 30, 77);
    await log.close();
    const { got, report } = await replayAll({ dir, segmentBytes: 400 });
    expect(view(got)).toEqual(view([...before, ...after]));
    expect(report.corrupt).toEqual([]);
  });

  it("'always': records acknowledged before a failure stay; the failed one and those behind it reject", async () => {
    const dir = tempDir();
    let writes = 0;
    const write: LogIo['write'] = async (handle, buffer, offset, length, position) => {
      if (++writes !== 4) return realWrite(handle, buffer, offset, length, position);
      await realWrite(handle, buffer, offset, length >> 1, position);
      throw enospc();
    };
    const log = await openLog({ dir, fsync: 'always', io: { write } });
    const appended = [];
    for (let i = 0; i < 6; i++) appended.push(log.append(1, seededBytes(i, 25)));
    const outcomes = await Promise.allSettled(appended.map((a) => a.durable));
    expect(outcomes.map((o) => o.status)).toEqual([
      'fulfilled',
      'fulfilled',
      'fulfilled',
      'rejected',
      'rejected',
      'rejected',
    ]);
    await log.append(2, Buffer.from('later')).durable;
    await log.close();
    const { got } = await replayAll({ dir });
    expect(got.map((r) => r.position)).toEqual([
      ...appended.slice(0, 3).map((a) => a.position),
      appended[3].position,
    ]);
    expect(got.at(-1)!.body.toString()).toBe('later');
  });

  it('an invalidated file handle is reported as ERR_TICKWHEEL_IO and the log reopens the segment', async () => {
    const dir = tempDir();
    let sabotage = false;
    const write: LogIo['write'] = async (handle: FileHandle, buffer, offset, length, position) => {
      if (sabotage) {
        sabotage = false;
        await handle.close(); // the fd is now invalid: the write below fails with EBADF
      }
      return realWrite(handle, buffer, offset, length, position);
    };
    const log = await openLog({ dir, io: { write } });
    const before = await fill(log, 4, () => 10);
    sabotage = true;
    const error = await rejection(log.append(1, Buffer.from('lost')).durable);
    expect(error.code).toBe('ERR_TICKWHEEL_IO');
    const after = await fill(log, 2, () => 10, 9);
    await log.close();
    expect(view((await replayAll({ dir })).got)).toEqual(view([...before, ...after]));
  });

  it('a failure nobody awaits does not crash the process; flush() reports it', async () => {
    const { control, write } = faultyWrite();
    const log = await openLog({ dir: tempDir(), io: { write } });
    control.armed = true;
    for (let i = 0; i < 10; i++) log.append(1, seededBytes(i, 10)); // durable ignored
    expect((await rejection(log.flush())).code).toBe('ERR_TICKWHEEL_IO');
    // Node reports unhandled rejections before the next turn of the event loop; one would
    // fail the test run here.
    await new Promise((resolve) => setImmediate(resolve));
    await log.append(1, Buffer.from('fine')).durable;
  });
});

describe('segments', () => {
  it('deleteSegment refuses the active segment with ERR_TICKWHEEL_SEGMENT_ACTIVE', async () => {
    const log = await openLog({ dir: tempDir(), segmentBytes: 100 });
    await fill(log, 10, () => 40);
    const active = log.segments().at(-1)!;
    expect((await rejection(log.deleteSegment(active))).code).toBe('ERR_TICKWHEEL_SEGMENT_ACTIVE');
    expect(log.segments().at(-1)).toBe(active);
  });

  it('deleteSegment removes a closed segment: its file, its records and its bytes', async () => {
    const dir = tempDir();
    const log = await openLog({ dir, segmentBytes: 200 });
    const records = await fill(log, 20, () => 40);
    const segments = log.segments();
    const bytesBefore = log.stats().bytes;
    await log.deleteSegment(segments[0]);
    await log.deleteSegment(segments[0]); // already gone: nothing to do
    expect(log.segments()).toEqual(segments.slice(1));
    expect(log.stats().bytes).toBe(bytesBefore - 200);
    expect(await readdir(dir)).not.toContain(segmentFileName(segments[0]));
    await expect(log.read(records[0].position)).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_POSITION',
    });
    await log.close();
    const { got } = await replayAll({ dir, segmentBytes: 200 });
    expect(view(got)).toEqual(view(records.filter((r) => segmentOf(r.position) !== segments[0])));
  });

  it('deleteSegment waits for records of that segment still being written', async () => {
    const dir = tempDir();
    const log = await openLog({
      dir,
      segmentBytes: 100,
      io: { sync: slowSync(10) },
    });
    log.append(1, Buffer.alloc(80));
    log.append(1, Buffer.alloc(80)); // segment 2 becomes active while segment 1 is staged
    await log.deleteSegment(1);
    expect(log.segments()).toEqual([2]);
    await log.flush();
    expect(await readdir(dir)).toEqual([segmentFileName(2)]);
  });

  it('stats() counts segments, bytes, appends, writes, fsyncs and failures', async () => {
    const log = await openLog({ dir: tempDir(), segmentBytes: 1000 });
    expect(log.stats()).toEqual({
      segments: 1,
      bytes: 0,
      appends: 0,
      writes: 0,
      fsyncs: 0,
      fsyncMsTotal: 0,
      fsyncMsMax: 0,
      failures: 0,
    });
    await fill(log, 30, () => 90);
    const stats = log.stats();
    expect(stats).toMatchObject({ segments: 3, bytes: 3000, appends: 30 });
    expect(stats.writes).toBeGreaterThanOrEqual(3);
    expect(stats.fsyncs).toBe(stats.writes);
  });
});

function endOf(records: Rec[]): number {
  const last = records[records.length - 1];
  return last.position + sizeOf(last);
}

describe('writeFully', () => {
  it('fails with ERR_TICKWHEEL_IO when a write makes no progress, instead of trying for ever', async () => {
    let calls = 0;
    const stuck = {
      write: async () => {
        calls++;
        return { bytesWritten: calls === 1 ? 3 : 0, buffer: Buffer.alloc(0) };
      },
    } as unknown as FileHandle;
    const error = await writeFully(stuck, Buffer.alloc(8), 0).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(TickwheelUnavailableError);
    expect((error as TickwheelUnavailableError).code).toBe('ERR_TICKWHEEL_IO');
    expect(calls).toBe(2);
  });
});
