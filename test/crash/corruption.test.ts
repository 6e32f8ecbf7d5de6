/**
 * Damage on disk: flipped bytes, cut and lengthened segment files, broken index files, and the
 * directory lock after a SIGKILLed owner. Real data directories, real files; the queue runs in
 * this process on a ManualClock anchored at the wall clock.
 *
 * Damage in bytes a checkpoint recorded as durable is refused at open and repaired on request
 * (test/crash/damage.test.ts has the rest of that); damage past them, where a crash can leave
 * it, is a torn tail to cut or a stretch to skip.
 */

import { spawn } from 'node:child_process';
import {
  appendFileSync,
  cpSync,
  existsSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/index.js';
import { RECORD_HEADER_BYTES } from '../../src/store/log/index.js';
import {
  TOPIC,
  consume,
  indexFiles,
  openQueue,
  trackQueues,
  segmentFiles,
  segmentRecords,
  tempDir,
} from './disk.js';

const N = 40;
const { track, close } = trackQueues();

/**
 * A closed data directory holding N messages due 100 ms to 4 s ahead, most beyond the horizon.
 * Without a snapshot: these tests damage the log and expect the whole-log replay to find it
 * (test/crash/snapshot.test.ts damages a log a snapshot stands in front of).
 */
async function populated(options: { segmentBytes?: number } = {}) {
  const dir = tempDir();
  const t0 = Date.now();
  const clock = new ManualClock(t0);
  const queue = await track(openQueue(dir, clock, { snapshotBytes: Infinity, ...options }));
  const payloads = new Map<string, unknown>();
  for (let i = 0; i < N; i++) {
    const payload = { i, text: `message ${i} `.repeat(1 + (i % 5)) };
    const { id } = await queue.schedule({ topic: TOPIC, payload, delayMs: 100 * (i + 1) });
    payloads.set(id, payload);
  }
  await close(queue);
  return { dir, clock, payloads, t0 };
}

/**
 * A crash image: N messages like populated(), copied while the queue is still open (fsync
 * 'never': every write is in the files), so no checkpoint since the open covers them: every
 * record is past the durable position, where a crash can tear the log.
 */
async function crashImage() {
  const dir = tempDir();
  const t0 = Date.now();
  const clock = new ManualClock(t0);
  const queue = await track(openQueue(dir, clock, { snapshotBytes: Infinity }));
  const payloads = new Map<string, unknown>();
  for (let i = 0; i < N; i++) {
    const payload = { i, text: `message ${i} `.repeat(1 + (i % 5)) };
    const { id } = await queue.schedule({ topic: TOPIC, payload, delayMs: 100 * (i + 1) });
    payloads.set(id, payload);
  }
  const image = tempDir();
  cpSync(dir, image, { recursive: true });
  rmSync(join(image, 'LOCK'));
  await close(queue);
  return { dir: image, clock, payloads, t0 };
}

/** Reopens, consumes past every due time, and checks what came: intact and never early. */
async function reopenAndConsume(
  dir: string,
  clock: ManualClock,
  payloads: Map<string, unknown>,
  options: { repair?: boolean } = {},
) {
  const queue = await track(openQueue(dir, clock, options));
  const recovery = queue.recovery!;
  // Before consuming appends acks: what recovery left of the log.
  const sizes = segmentFiles(dir).map((file) => statSync(file).size);
  const got = await consume(queue, clock, 100 * N + 1500);
  await close(queue);
  for (const message of got) {
    expect(payloads.has(message.id), `unknown message ${message.id}`).toBe(true);
    expect(message.payload).toEqual(payloads.get(message.id));
    expect(message.receivedAt).toBeGreaterThanOrEqual(message.deliverAt);
  }
  const ids = got.map((message) => message.id);
  expect(new Set(ids).size).toBe(ids.length);
  return { recovery, ids: new Set(ids), sizes };
}

function flipByte(file: string, at: number): void {
  const bytes = readFileSync(file);
  bytes[at] ^= 0xff;
  writeFileSync(file, bytes);
}

describe('a damaged record in the middle of a segment, in durable bytes', () => {
  it.each([
    ['its magic byte', 0, /no record starts here/],
    ['its type', 1, /CRC mismatch/],
    ['its length', 3, /runs past the end of the segment|CRC mismatch/],
    ['its CRC', 7, /CRC mismatch/],
    ['its body (the payload)', -3, /CRC mismatch/],
  ])(
    'flipped byte in %s: open refuses, naming it; a repair drops that message and delivers every other',
    async (_what, where, reason) => {
      const { dir, clock, payloads } = await populated();
      const [segment] = segmentFiles(dir);
      const records = segmentRecords(segment);
      expect(records).toHaveLength(N);
      const victim = records[N / 2];
      const at = where >= 0 ? victim.offset + where : victim.offset + victim.size + where;
      flipByte(segment, at);

      await expect(openQueue(dir, clock)).rejects.toMatchObject({
        code: 'ERR_TICKWHEEL_CORRUPT',
        damage: [{ segment: 1, from: victim.offset, to: victim.offset + victim.size }],
        message: expect.stringMatching(reason),
      });
      const { recovery, ids } = await reopenAndConsume(dir, clock, payloads, { repair: true });
      expect(recovery.corrupt).toHaveLength(1);
      expect(recovery.corrupt[0].where).toBe(`log segment 1 at byte ${victim.offset}`);
      expect(recovery.corrupt[0].reason).toMatch(reason);
      expect(recovery.repair!.damage).toHaveLength(1);
      expect(recovery.repair!.dropped.length + recovery.repair!.unnamed).toBe(1);
      expect(recovery.truncatedBytes).toBe(0);
      expect(recovery.live).toBe(N - 1);
      expect(ids.has(victim.id!)).toBe(false);
      expect(ids.size).toBe(N - 1);
    },
  );

  it('in a closed segment, with several segments: the same, and later segments are intact', async () => {
    const { dir, clock, payloads } = await populated({ segmentBytes: 512 });
    const segments = segmentFiles(dir);
    expect(segments.length).toBeGreaterThan(3);
    const records = segmentRecords(segments[1]);
    expect(records.length).toBeGreaterThan(1);
    const victim = records[0];
    flipByte(segments[1], victim.offset + victim.size - 1);

    await expect(openQueue(dir, clock)).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_CORRUPT',
      message: expect.stringMatching(/log segment 2 .*CRC mismatch/),
    });
    const { recovery, ids } = await reopenAndConsume(dir, clock, payloads, { repair: true });
    expect(recovery.corrupt).toHaveLength(1);
    expect(recovery.corrupt[0].where).toBe(`log segment 2 at byte ${victim.offset}`);
    // Due inside the horizon: no index entry confirms the id left in the damaged bytes, so the
    // repair counts the message and names it only as a guess.
    expect(recovery.repair!.dropped).toEqual([]);
    expect(recovery.repair!.unnamed).toBe(1);
    expect(recovery.repair!.notes.join('\n')).toContain(`of message ${victim.id} (topic ${TOPIC})`);
    expect(ids.size).toBe(N - 1);
    expect(ids.has(victim.id!)).toBe(false);
  });

  it('several damaged records: each is reported, all the others are delivered', async () => {
    const { dir, clock, payloads } = await populated();
    const [segment] = segmentFiles(dir);
    const records = segmentRecords(segment);
    const victims = [records[3], records[17], records[18], records[30]];
    for (const victim of victims) flipByte(segment, victim.offset + RECORD_HEADER_BYTES + 5);

    const refused = openQueue(dir, clock);
    await expect(refused).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_CORRUPT' });
    const { recovery, ids } = await reopenAndConsume(dir, clock, payloads, { repair: true });
    // Two neighbours damaged are one damaged stretch.
    expect(recovery.corrupt.map((c) => c.where)).toEqual(
      [records[3], records[17], records[30]].map((r) => `log segment 1 at byte ${r.offset}`),
    );
    expect(ids.size).toBe(N - victims.length);
    for (const victim of victims) expect(ids.has(victim.id!)).toBe(false);
  });
});

describe('a damaged record in the middle of a segment, past the durable position', () => {
  it('(where no checkpoint vouched for it) is skipped and reported; every other message is delivered', async () => {
    const { dir, clock, payloads } = await crashImage();
    const [segment] = segmentFiles(dir);
    const records = segmentRecords(segment);
    const victim = records[N / 2];
    flipByte(segment, victim.offset + victim.size - 3);

    const { recovery, ids } = await reopenAndConsume(dir, clock, payloads);
    expect(recovery.corrupt).toEqual([
      { where: `log segment 1 at byte ${victim.offset}`, reason: 'CRC mismatch' },
    ]);
    expect(recovery.repair).toBeUndefined();
    expect(ids.size).toBe(N - 1);
    expect(ids.has(victim.id!)).toBe(false);
  });
});

describe('a torn tail (the last segment cut short past the durable position, as by a crash mid-write)', () => {
  it.each([
    ['mid-header', 4],
    ['right after the header', RECORD_HEADER_BYTES],
    ['mid-body', RECORD_HEADER_BYTES + 7],
  ])(
    'cut %s: cut back to the last whole record, reported in truncatedBytes, the rest delivered',
    async (_what, keep) => {
      const { dir, clock, payloads } = await crashImage();
      const [segment] = segmentFiles(dir);
      const records = segmentRecords(segment);
      const last = records[records.length - 1];
      truncateSync(segment, last.offset + keep);

      const { recovery, ids, sizes } = await reopenAndConsume(dir, clock, payloads);
      expect(recovery.truncatedBytes).toBe(keep);
      expect(recovery.corrupt).toEqual([]);
      expect(sizes).toEqual([last.offset]);
      // The cut record's message was acknowledged once; only the rest can be checked.
      expect(ids.size).toBe(N - 1);
      expect(ids.has(last.id!)).toBe(false);
    },
  );

  it('appends continue where the tail was cut: a later reopen finds no damage', async () => {
    const { dir, clock, payloads } = await crashImage();
    const [segment] = segmentFiles(dir);
    const records = segmentRecords(segment);
    const last = records[records.length - 1];
    truncateSync(segment, last.offset + RECORD_HEADER_BYTES + 3);
    payloads.delete(last.id!);

    const queue = await track(openQueue(dir, clock));
    expect(queue.recovery!.truncatedBytes).toBe(RECORD_HEADER_BYTES + 3);
    for (let i = 0; i < 5; i++) {
      const payload = { after: i };
      const { id } = await queue.schedule({ topic: TOPIC, payload, delayMs: 50 * (i + 1) });
      payloads.set(id, payload);
    }
    await close(queue);

    const { recovery, ids } = await reopenAndConsume(dir, clock, payloads);
    expect(recovery.corrupt).toEqual([]);
    expect(recovery.truncatedBytes).toBe(0);
    expect(ids).toEqual(new Set(payloads.keys()));
  });

  it('the same cut in bytes the last checkpoint recorded as durable is refused, not cut', async () => {
    const { dir, clock } = await populated();
    const [segment] = segmentFiles(dir);
    const records = segmentRecords(segment);
    const last = records[records.length - 1];
    const size = statSync(segment).size;
    truncateSync(segment, last.offset + 4);

    await expect(openQueue(dir, clock)).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_CORRUPT',
      damage: [{ segment: 1, from: last.offset + 4, to: size }],
    });
    expect(statSync(segment).size).toBe(last.offset + 4);
  });
});

describe('garbage after the last record', () => {
  it.each([
    ['random bytes', () => Buffer.from(Array.from({ length: 100 }, (_, i) => (i * 37 + 11) % 251))],
    [
      'the start of a record whose body never came',
      () => Buffer.from([0xa7, 1, 200, 0, 0, 0, 1, 2, 3, 4, 9, 9, 9]),
    ],
    ['a header claiming a huge body', () => Buffer.from([0xa7, 1, 255, 255, 255, 127, 0, 0, 0, 0])],
    ['a lone magic byte', () => Buffer.from([0xa7])],
  ])('%s: cut, nothing lost', async (_what, garbage) => {
    const { dir, clock, payloads } = await populated();
    const [segment] = segmentFiles(dir);
    const size = statSync(segment).size;
    const bytes = garbage();
    appendFileSync(segment, bytes);

    const { recovery, ids, sizes } = await reopenAndConsume(dir, clock, payloads);
    expect(recovery.truncatedBytes).toBe(bytes.length);
    expect(recovery.corrupt).toEqual([]);
    expect(sizes).toEqual([size]);
    expect(ids).toEqual(new Set(payloads.keys()));
  });

  it('at the end of a closed segment: reported as corrupt (not cut), nothing lost', async () => {
    const { dir, clock, payloads } = await populated({ segmentBytes: 512 });
    const segments = segmentFiles(dir);
    const size = statSync(segments[0]).size;
    appendFileSync(segments[0], Buffer.alloc(40, 0x5a));

    const { recovery, ids } = await reopenAndConsume(dir, clock, payloads);
    expect(recovery.corrupt).toHaveLength(1);
    expect(recovery.corrupt[0].where).toBe(`log segment 1 at byte ${size}`);
    expect(recovery.corrupt[0].reason).toMatch(/no intact record follows/);
    expect(recovery.truncatedBytes).toBe(0);
    expect(ids).toEqual(new Set(payloads.keys()));
  });
});

describe('a damaged schedule index (the log is the truth)', () => {
  it.each([
    ['one index file cut to a non-multiple of 24 bytes', (files: string[]) => cut(files[0], 5)],
    ['one index file emptied', (files: string[]) => truncateSync(files[1], 0)],
    ['one index file deleted', (files: string[]) => rmSync(files[2])],
    ['every index file deleted', (files: string[]) => files.forEach((file) => rmSync(file))],
    [
      'the index folder deleted',
      (files: string[]) => rmSync(dirname(files[0]), { recursive: true }),
    ],
    [
      'the checkpoint deleted',
      (files: string[]) => rmSync(join(dirname(files[0]), '..', 'checkpoint.json')),
    ],
    [
      "one index file emptied, and the checkpoint's sizes no longer numbers",
      (files: string[]) => {
        truncateSync(files[1], 0);
        const path = join(dirname(files[0]), '..', 'checkpoint.json');
        const checkpoint = JSON.parse(readFileSync(path, 'utf8')) as { windows: object };
        for (const key of Object.keys(checkpoint.windows)) {
          (checkpoint.windows as Record<string, unknown>)[key] = null;
        }
        writeFileSync(path, JSON.stringify(checkpoint));
      },
    ],
  ])('%s: every message is still delivered, on time', async (_what, damage) => {
    const { dir, clock, payloads } = await populated();
    const files = indexFiles(dir);
    // Messages due beyond the 1 s horizon went to index windows of 500 ms.
    expect(files.length).toBeGreaterThanOrEqual(4);
    damage(files);

    const { recovery, ids } = await reopenAndConsume(dir, clock, payloads);
    expect(recovery.corrupt).toEqual([]);
    expect(ids).toEqual(new Set(payloads.keys()));
  });
});

function cut(file: string, bytes: number): void {
  truncateSync(file, statSync(file).size - bytes);
}

describe('the directory lock', () => {
  const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
  const entry = join(root, 'dist', 'delay-queue.js');

  it('a second open in the same process is refused with ERR_TICKWHEEL_LOCKED', async () => {
    const dir = tempDir();
    const clock = new ManualClock(Date.now());
    await track(openQueue(dir, clock));
    await expect(openQueue(dir, clock)).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_LOCKED' });
  });

  it('an open while another live process holds the directory is refused; after that process is SIGKILLed the lock is taken over and its messages delivered', async () => {
    if (!existsSync(entry)) throw new Error(`${entry} is missing: run \`npm run build\``);
    const dir = tempDir();
    // The owner: opens the queue, schedules, reports its ids, then idles until killed.
    const script = `
      const { DelayQueue } = await import(${JSON.stringify(pathToFileURL(entry).href)});
      const queue = await DelayQueue.open({ dir: ${JSON.stringify(dir)}, fsync: 'batch' });
      const ids = [];
      for (let i = 0; i < 5; i++) {
        ids.push((await queue.schedule({ topic: ${JSON.stringify(TOPIC)}, payload: { i }, delayMs: 10 * i })).id);
      }
      process.stdout.write(JSON.stringify(ids) + '\\n');
      setInterval(() => {}, 1000);
    `;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = new Promise<NodeJS.Signals | null>((done) =>
      child.on('exit', (_code, signal) => done(signal)),
    );
    let stderr = '';
    child.stderr.on('data', (chunk) => (stderr += String(chunk)));
    const ids = await new Promise<string[]>((done, fail) => {
      let out = '';
      child.stdout.on('data', (chunk) => {
        out += String(chunk);
        if (out.includes('\n')) done(JSON.parse(out) as string[]);
      });
      child.on('exit', () => fail(new Error(`the owner process ended early: ${stderr}`)));
    });
    try {
      expect(readFileSync(join(dir, 'LOCK'), 'utf8').trim()).toBe(String(child.pid));
      const clock = new ManualClock(Date.now());
      await expect(openQueue(dir, clock)).rejects.toMatchObject({
        code: 'ERR_TICKWHEEL_LOCKED',
        message: expect.stringContaining(String(child.pid)),
      });
    } finally {
      child.kill('SIGKILL');
    }
    expect(await exited).toBe('SIGKILL');

    // The LOCK file is still there, naming a dead process: taken over.
    expect(existsSync(join(dir, 'LOCK'))).toBe(true);
    const clock = new ManualClock(Date.now() + 1000);
    const queue = await track(openQueue(dir, clock));
    expect(readFileSync(join(dir, 'LOCK'), 'utf8').trim()).toBe(String(process.pid));
    expect(queue.recovery!.live).toBe(5);
    const got = await consume(queue, clock, 100);
    expect(new Set(got.map((message) => message.id))).toEqual(new Set(ids));
    expect(got.map((message) => message.payload)).toEqual(
      expect.arrayContaining([0, 1, 2, 3, 4].map((i) => ({ i }))),
    );
  });
});
