/**
 * Damage to data the log had made durable: a missing segment, a segment cut short below the
 * position a checkpoint recorded, a flipped byte in an older segment. Each is corruption, not
 * a torn tail: `DelayQueue.open` refuses with ERR_TICKWHEEL_CORRUPT and says what is damaged,
 * changing nothing; `FileStore.planRepair` says what a repair would drop; `repair: true` drops
 * exactly the messages that cannot be read, reports them, and keeps (and delivers, none early)
 * every other one. A write cut off past the durable position is still a torn tail, cut
 * silently. Real data directories; queues on a ManualClock anchored at the wall clock.
 */

import { spawn } from 'node:child_process';
import {
  existsSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/index.js';
import { FileStore } from '../../src/store/file/file-store.js';
import { RECORD_HEADER_BYTES, RECORD_MAGIC } from '../../src/store/log/index.js';
import { MOVE, SCHEDULE, recordId } from '../../src/store/file/records.js';
import { TOPIC, consume, openQueue, segmentFiles, tempDir, trackQueues } from './disk.js';

const { track, close } = trackQueues();

const N = 60;

interface LogRecord {
  segment: number;
  offset: number;
  size: number;
  type: number;
  id: string;
}

/** Every record of every segment of an intact log, in order. */
function logRecords(dir: string): LogRecord[] {
  const records: LogRecord[] = [];
  for (const file of segmentFiles(dir)) {
    const segment = Number(file.slice(-14, -4));
    const bytes = readFileSync(file);
    let offset = 0;
    while (offset < bytes.length) {
      if (bytes[offset] !== RECORD_MAGIC) throw new Error(`${file}: no record at ${offset}`);
      const type = bytes[offset + 1];
      const length = bytes.readUInt32LE(offset + 2);
      const body = bytes.subarray(
        offset + RECORD_HEADER_BYTES,
        offset + RECORD_HEADER_BYTES + length,
      );
      records.push({
        segment,
        offset,
        size: RECORD_HEADER_BYTES + length,
        type,
        id: recordId(type, body),
      });
      offset += RECORD_HEADER_BYTES + length;
    }
  }
  return records;
}

function segmentFile(dir: string, segment: number): string {
  return join(dir, 'log', `${String(segment).padStart(10, '0')}.seg`);
}

/** Every file of a data directory with its size and content hash: what "nothing changed" means. */
function fingerprint(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (sub: string) => {
    for (const name of readdirSync(join(dir, sub))) {
      const path = join(dir, sub, name);
      if (statSync(path).isDirectory()) walk(join(sub, name));
      else if (name !== 'LOCK') out[join(sub, name)] = readFileSync(path).toString('base64');
    }
  };
  walk('.');
  return out;
}

/**
 * A closed data directory (segments of 1 KiB) holding N messages m0..m59 due 1.5 s to 7.4 s
 * ahead (beyond the 1 s horizon: in index windows). After the first 30, m1 is rescheduled to
 * 9 s and m2 cancelled, so their later records are in later segments than their schedules.
 */
async function populated(options: { snapshot: boolean }) {
  const dir = tempDir();
  const t0 = Date.now();
  const clock = new ManualClock(t0);
  const queue = await track(
    openQueue(dir, clock, {
      segmentBytes: 1024,
      ...(options.snapshot ? {} : { snapshotBytes: Infinity }),
    }),
  );
  const expected = new Map<string, { payload: unknown; deliverAt: number }>();
  const schedule = async (i: number) => {
    const payload = { i, text: 'x'.repeat(40) };
    const id = `m${i}`;
    const { deliverAt } = await queue.schedule({
      topic: TOPIC,
      id,
      payload,
      delayMs: 1500 + 100 * i,
    });
    expected.set(id, { payload, deliverAt });
  };
  for (let i = 0; i < 30; i++) await schedule(i);
  expect(await queue.reschedule('m1', { delayMs: 9000 })).toBe(true);
  expected.get('m1')!.deliverAt = t0 + 9000;
  expect(await queue.cancel('m2')).toBe(true);
  expected.delete('m2');
  for (let i = 30; i < N; i++) await schedule(i);
  await close(queue);
  const records = logRecords(dir);
  expect(new Set(records.map((r) => r.segment)).size).toBeGreaterThan(5);
  expect(existsSync(join(dir, 'snapshot.bin'))).toBe(options.snapshot);
  return { dir, clock, expected, records };
}

/** Ids of the messages whose schedule record is among `records`, and still live. */
function scheduledIn(records: LogRecord[], live: Map<string, unknown>): Set<string> {
  return new Set(records.filter((r) => r.type === SCHEDULE && live.has(r.id)).map((r) => r.id));
}

async function refusedOpen(dir: string, clock: ManualClock) {
  const before = fingerprint(dir);
  const err = (await openQueue(dir, clock).then(
    (queue) => {
      void queue.close();
      throw new Error('the damaged directory was opened');
    },
    (e: unknown) => e,
  )) as Error & { code?: string; damage?: Array<Record<string, unknown>> };
  expect(err.code).toBe('ERR_TICKWHEEL_CORRUPT');
  expect(err.name).toBe('TickwheelCorruptError');
  expect(err.message).toContain(`tickwheel repair --dir ${dir}`);
  // A refused open changes nothing: not the log, not the snapshot, not the checkpoint.
  expect(fingerprint(dir)).toEqual(before);
  return err;
}

/**
 * Plans the repair (changing nothing), then repairs; checks that the plan and the repair agree,
 * that exactly `lost` is gone (named or counted), that those ids answer "not found" and are not
 * counted, and that every other message is delivered, intact and never early.
 */
async function repairAndCheck(
  dir: string,
  clock: ManualClock,
  expected: Map<string, { payload: unknown; deliverAt: number }>,
  lost: Set<string>,
  /** Messages finished before the damage that the repair must not bring back (named too). */
  finished: Set<string> = new Set(),
) {
  expect(lost.size).toBeGreaterThan(0);
  const before = fingerprint(dir);
  const plan = await FileStore.planRepair({ dir, windowMs: 500 });
  expect(fingerprint(dir)).toEqual(before);
  expect(plan.applied).toBe(false);

  const logBefore = segmentFiles(dir).reduce((sum, file) => sum + statSync(file).size, 0);
  const queue = await track(openQueue(dir, clock, { repair: true }));
  const report = queue.recovery!.repair!;
  expect(report.applied).toBe(true);
  expect(report.damage).toEqual(plan.damage);
  expect(report.dropped).toEqual(plan.dropped);
  expect(report.unnamed).toBe(plan.unnamed);
  for (const { id } of report.dropped) {
    expect(lost.has(id) || finished.has(id), `${id} was not lost`).toBe(true);
  }
  const named = report.dropped.filter(({ id }) => !finished.has(id));
  expect(named.length + report.unnamed).toBe(lost.size);
  expect(report.lost).toBe(report.dropped.length + report.unnamed);

  for (const id of [...lost, ...finished]) {
    expect(await queue.get(id)).toBeUndefined();
    expect(await queue.cancel(id)).toBe(false);
    expect(await queue.reschedule(id, { delayMs: 10 })).toBe(false);
  }
  const stats = await queue.stats();
  expect(stats.topics[TOPIC].scheduled).toBe(expected.size - lost.size);
  // No snapshot after a repair: every byte replayed is uncovered, and every one it appended
  // (FINISH records). The bytes it cuts from a segment cut short leave the files' sizes behind.
  const { logBytes = 0, uncoveredLogBytes } = stats.store!;
  if (!report.damage.some((d) => d.reason.startsWith('cut short'))) {
    expect(uncoveredLogBytes).toBe(queue.recovery!.replayedBytes + logBytes - logBefore);
  }
  expect(queue.recovery!.live).toBe(expected.size - lost.size);

  const got = await consume(queue, clock, 10_000);
  await close(queue);
  for (const message of got) {
    expect(lost.has(message.id), `${message.id} was lost, yet delivered`).toBe(false);
    expect(message.payload).toEqual(expected.get(message.id)?.payload);
    expect(message.deliverAt).toBe(expected.get(message.id)?.deliverAt);
    expect(message.receivedAt).toBeGreaterThanOrEqual(message.deliverAt);
  }
  const ids = got.map((message) => message.id).sort();
  expect(ids).toEqual([...expected.keys()].filter((id) => !lost.has(id)).sort());

  // Repaired for good: the next open does not refuse, and still tells of the repair.
  const again = await track(openQueue(dir, clock));
  expect(again.recovery!.repair?.dropped).toEqual(report.dropped);
  expect(again.recovery!.corrupt).toEqual([]);
  await close(again);
  return report;
}

describe('an older segment deleted', () => {
  it.each([
    ['without a snapshot', false],
    ['with a snapshot', true],
  ])('%s: open refuses, naming it; repair drops exactly its messages', async (_what, snapshot) => {
    const { dir, clock, expected, records } = await populated({ snapshot });
    const size = statSync(segmentFile(dir, 1)).size;
    const lost = scheduledIn(
      records.filter((r) => r.segment === 1),
      expected,
    );
    expect(lost.has('m1')).toBe(true); // moved later: its MOVE outlives its schedule
    rmSync(segmentFile(dir, 1));

    const err = await refusedOpen(dir, clock);
    expect(err.message).toMatch(/log segment 1 \(bytes 0 to \d+\) is missing/);
    expect(err.damage).toEqual([
      expect.objectContaining({ segment: 1, from: 0, to: size, messages: lost.size }),
    ]);

    const report = await repairAndCheck(dir, clock, expected, lost);
    expect(report.dropped).toContainEqual(
      expect.objectContaining({
        id: 'm1',
        topic: TOPIC,
        reason: expect.stringMatching(/schedule/),
      }),
    );
    expect(report.exact).toBe(true);
  });
});

describe('a middle segment deleted, with a snapshot', () => {
  it('the message rescheduled there is dropped (not delivered at its old time) and the one cancelled there stays cancelled', async () => {
    const { dir, clock, expected, records } = await populated({ snapshot: true });
    const move = records.find((r) => r.type === MOVE && r.id === 'm1')!;
    const segment = move.segment;
    expect(records.some((r) => r.segment === segment && r.id === 'm2' && r.type !== SCHEDULE)).toBe(
      true,
    );
    const lost = scheduledIn(
      records.filter((r) => r.segment === segment),
      expected,
    );
    lost.add('m1');
    rmSync(segmentFile(dir, segment));

    const err = await refusedOpen(dir, clock);
    expect(err.damage).toEqual([expect.objectContaining({ segment, reason: 'missing' })]);
    const report = await repairAndCheck(dir, clock, expected, lost, new Set(['m2']));
    expect(report.dropped).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ id: 'm1', reason: expect.stringMatching(/latest change/) }),
        expect.objectContaining({ id: 'm2', reason: expect.stringMatching(/had been finished/) }),
      ]),
    );
    expect(report.exact).toBe(true);
  });

  it('without a snapshot the same loss is refused, and the repair says what it cannot know', async () => {
    const { dir, clock, records } = await populated({ snapshot: false });
    const segment = records.find((r) => r.type === MOVE && r.id === 'm1')!.segment;
    rmSync(segmentFile(dir, segment));
    await refusedOpen(dir, clock);
    const plan = await FileStore.planRepair({ dir, windowMs: 500 });
    expect(plan.exact).toBe(false);
    // m2's cancel was lost with the segment: it is live again by the readable log, and the
    // checkpoint's count of live messages in its segment shows one too many.
    expect(plan.notes.join('\n')).toMatch(
      /1 messages with their payload in log segment 1 are live again/,
    );
    expect(plan.notes.join('\n')).toMatch(/keep their last readable state/);
  });
});

describe('a segment cut in the middle, below the durable position', () => {
  it('a closed segment: open refuses; repair drops the messages of the cut part', async () => {
    const { dir, clock, expected, records } = await populated({ snapshot: true });
    const inThird = records.filter((r) => r.segment === 3);
    const cutAt = inThird[1].offset + 20; // inside its second record
    const full = statSync(segmentFile(dir, 3)).size;
    truncateSync(segmentFile(dir, 3), cutAt);
    const lost = scheduledIn(inThird.slice(1), expected);

    const err = await refusedOpen(dir, clock);
    expect(err.message).toMatch(/log segment 3 .*cut short/);
    expect(err.damage).toEqual([expect.objectContaining({ segment: 3, from: cutAt, to: full })]);
    const report = await repairAndCheck(dir, clock, expected, lost);
    expect(report.exact).toBe(true);
  });

  it.each([
    ['without a snapshot', false],
    ['with a snapshot', true],
  ])(
    'the last segment, %s: not a torn tail (the checkpoint says those bytes were durable)',
    async (_what, snapshot) => {
      const { dir, clock, expected, records } = await populated({ snapshot });
      const last = Math.max(...records.map((r) => r.segment));
      const inLast = records.filter((r) => r.segment === last);
      expect(inLast.length).toBeGreaterThan(2);
      const cutAt = inLast[1].offset + 3;
      truncateSync(segmentFile(dir, last), cutAt);
      const lost = scheduledIn(inLast.slice(1), expected);

      const err = await refusedOpen(dir, clock);
      expect(err.message).toMatch(new RegExp(`log segment ${last} .*cut short`));
      await repairAndCheck(dir, clock, expected, lost);
    },
  );
});

describe('a byte flipped in durable data of an older segment', () => {
  it('without a snapshot: open refuses; repair drops exactly that message, by name', async () => {
    const { dir, clock, expected, records } = await populated({ snapshot: false });
    const victim = records.find((r) => r.segment === 2 && r.type === SCHEDULE)!;
    const file = segmentFile(dir, 2);
    const bytes = readFileSync(file);
    bytes[victim.offset + victim.size - 5] ^= 0xff; // in its payload
    writeFileSync(file, bytes);

    const err = await refusedOpen(dir, clock);
    expect(err.message).toMatch(/log segment 2 .*CRC mismatch/);
    expect(err.damage).toEqual([
      expect.objectContaining({
        segment: 2,
        from: victim.offset,
        to: victim.offset + victim.size,
      }),
    ]);
    const report = await repairAndCheck(dir, clock, expected, new Set([victim.id]));
    expect(report.dropped).toEqual([
      expect.objectContaining({ id: victim.id, reason: expect.stringMatching(/damaged/) }),
    ]);
    expect(report.unnamed).toBe(0);
  });

  it('a flipped MOVE record: the moved message is dropped, not delivered at its old time', async () => {
    const { dir, clock, expected, records } = await populated({ snapshot: true });
    const move = records.find((r) => r.type === MOVE && r.id === 'm1')!;
    expect(move.segment).toBeGreaterThan(records.find((r) => r.id === 'm1')!.segment);
    const file = segmentFile(dir, move.segment);
    const bytes = readFileSync(file);
    bytes[move.offset + RECORD_HEADER_BYTES + 2] ^= 0x10; // its due time
    writeFileSync(file, bytes);
    // Behind the snapshot: the open does not read it, but the repair scans the whole log.
    const report = await repairAndCheck(dir, clock, expected, new Set(['m1']));
    expect(report.dropped).toEqual([
      expect.objectContaining({ id: 'm1', reason: expect.stringMatching(/latest change/) }),
    ]);
    expect(report.exact).toBe(true);
  });

  it('behind a snapshot: found when read, and then an ERR_TICKWHEEL_CORRUPT naming the repair, never another error', async () => {
    const { dir, clock, expected, records } = await populated({ snapshot: true });
    const victim = records.find((r) => r.segment === 2 && r.type === SCHEDULE)!;
    const file = segmentFile(dir, 2);
    const bytes = readFileSync(file);
    bytes[victim.offset + victim.size - 5] ^= 0xff;
    writeFileSync(file, bytes);

    const queue = await track(openQueue(dir, clock));
    expect(queue.recovery!.snapshot).toBe('used');
    for (const call of [
      () => queue.get(victim.id),
      () => queue.cancel(victim.id),
      () => queue.reschedule(victim.id, { delayMs: 10 }),
    ]) {
      await expect(call()).rejects.toMatchObject({
        code: 'ERR_TICKWHEEL_CORRUPT',
        message: expect.stringContaining(`tickwheel repair --dir ${dir}`),
      });
    }
    await close(queue);
    const report = await repairAndCheck(dir, clock, expected, new Set([victim.id]));
    expect(report.dropped).toEqual([expect.objectContaining({ id: victim.id })]);
  });
});

describe('a torn tail past the durable position is still cut silently', () => {
  const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
  const entry = join(root, 'dist', 'delay-queue.js');

  it.each(['never', 'batch'])(
    "SIGKILLed writer (fsync '%s'), its last record cut: opens, cuts it, delivers the rest",
    async (fsync) => {
      if (!existsSync(entry)) throw new Error(`${entry} is missing: run \`npm run build\``);
      const { dir, clock, expected } = await populated({ snapshot: true });
      // The writer: opens the directory (a checkpoint at open), appends, and is killed before
      // the next checkpoint; what it appended is past every durable position on record.
      const script = `
        const { DelayQueue } = await import(${JSON.stringify(pathToFileURL(entry).href)});
        const queue = await DelayQueue.open({ dir: ${JSON.stringify(dir)}, fsync: '${fsync}',
          horizonMs: 1000, windowMs: 500, segmentBytes: 1024, checkpointIntervalMs: 1000000 });
        const ids = [];
        for (let i = 0; i < 5; i++) {
          const id = 'late' + i;
          await queue.schedule({ topic: ${JSON.stringify(TOPIC)}, id, payload: { late: i }, delayMs: 2000 + i });
          ids.push(id);
        }
        process.stdout.write(JSON.stringify(ids) + '\\n');
        setInterval(() => {}, 1000);
      `;
      const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (chunk) => (stderr += String(chunk)));
      const exited = new Promise((done) => child.on('exit', done));
      await new Promise<void>((done, fail) => {
        child.stdout.on('data', (chunk) => String(chunk).includes('\n') && done());
        child.on('exit', () => fail(new Error(`the writer ended early: ${stderr}`)));
      });
      child.kill('SIGKILL');
      await exited;

      const records = logRecords(dir);
      const lastRecord = records[records.length - 1];
      expect(lastRecord.id).toBe('late4');
      const file = segmentFile(dir, lastRecord.segment);
      truncateSync(file, lastRecord.offset + 7);

      const queue = await track(openQueue(dir, clock));
      expect(queue.recovery!.truncatedBytes).toBe(7);
      expect(queue.recovery!.corrupt).toEqual([]);
      expect(queue.recovery!.repair).toBeUndefined();
      const got = await consume(queue, clock, 10_000);
      await close(queue);
      const ids = new Set(got.map((message) => message.id));
      for (const id of expected.keys()) expect(ids.has(id)).toBe(true);
      for (let i = 0; i < 4; i++) expect(ids.has(`late${i}`)).toBe(true);
      expect(ids.has('late4')).toBe(false);
      for (const message of got)
        expect(message.receivedAt).toBeGreaterThanOrEqual(message.deliverAt);
    },
    30_000,
  );
});
