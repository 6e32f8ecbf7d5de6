/**
 * Recovery from a snapshot of the file store's tables: used when it can be trusted, replaying
 * only the log after it; rejected (and the whole log replayed) when it is damaged, of another
 * version, or does not fit the log and index it sits next to; and harmless when a crash cuts
 * its writing short. Real data directories; queues on a ManualClock.
 */

import { spawn } from 'node:child_process';
import {
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
import type { DelayQueue } from '../../src/delay-queue.js';
import { FileStore } from '../../src/store/file/file-store.js';
import { STORE_FORMAT } from '../../src/store/file/layout.js';
import { SNAPSHOT_FILE, SNAPSHOT_VERSION } from '../../src/store/file/snapshot.js';
import { advance } from '../queue/harness.js';
import {
  TOPIC,
  consume,
  indexFiles,
  openQueue,
  segmentFiles,
  segmentRecords,
  tempDir,
  trackQueues,
} from './disk.js';

const { track, close } = trackQueues();

/** Makes the store write a checkpoint with a snapshot now. */
function snapshotNow(queue: DelayQueue): Promise<void> {
  return (queue as unknown as { backend: { store: FileStore } }).backend.store.checkpoint('always');
}

function storeOf(queue: DelayQueue): FileStore {
  return (queue as unknown as { backend: { store: FileStore } }).backend.store;
}

/** A data directory with `n` messages due 100 ms apart from 100 ms on, closed (a snapshot). */
async function populated(n = 40, options: Parameters<typeof openQueue>[2] = {}) {
  const dir = tempDir();
  const t0 = Date.now();
  const clock = new ManualClock(t0);
  const queue = await track(openQueue(dir, clock, options));
  const payloads = new Map<string, unknown>();
  for (let i = 0; i < n; i++) {
    const payload = { i };
    const { id } = await queue.schedule({ topic: TOPIC, payload, delayMs: 100 * (i + 1) });
    payloads.set(id, payload);
  }
  await close(queue);
  return { dir, clock, payloads, t0 };
}

async function deliveredIds(dir: string, clock: ManualClock, ms: number) {
  const queue = await track(openQueue(dir, clock));
  const recovery = queue.recovery!;
  const got = await consume(queue, clock, ms);
  await close(queue);
  for (const message of got) expect(message.receivedAt).toBeGreaterThanOrEqual(message.deliverAt);
  return { recovery, ids: got.map((message) => message.id) };
}

describe('recovery from a snapshot', () => {
  it('close() writes a snapshot; the next open uses it and replays nothing', async () => {
    const { dir, clock, payloads } = await populated();
    expect(existsSync(join(dir, SNAPSHOT_FILE))).toBe(true);
    const { recovery, ids } = await deliveredIds(dir, clock, 5000);
    expect(recovery.snapshot).toBe('used');
    expect(recovery.replayedBytes).toBe(0);
    expect(recovery.live).toBe(payloads.size);
    expect(ids).toEqual([...payloads.keys()]);
  });

  it('is written as soon as the log has grown by snapshotBytes, not at the next periodic checkpoint', async () => {
    const dir = tempDir();
    const clock = new ManualClock(Date.now());
    // checkpointIntervalMs: 1,000,000 (openQueue): no periodic checkpoint during the test.
    const queue = await track(openQueue(dir, clock, { snapshotBytes: 8192 }));
    const store = storeOf(queue);
    for (let i = 0; i < 40; i++) {
      await queue.schedule({ topic: TOPIC, payload: 'p'.repeat(100), delayMs: 1e6 });
    }
    expect(store.stats().snapshots).toBe(0); // about 6 KB so far
    for (let i = 0; i < 40; i++) {
      await queue.schedule({ topic: TOPIC, payload: 'p'.repeat(100), delayMs: 1e6 });
    }
    await store.checkpoint('never'); // waits for the checkpoint under way, if any
    await store.checkpoint('never');
    expect(store.stats().snapshots).toBe(1);
    // The snapshot includes the record whose append started it (it was applied first).
    const image = tempDir();
    cpSync(dir, image, { recursive: true });
    rmSync(join(image, 'LOCK'));
    const reopened = await track(openQueue(image, clock));
    expect(reopened.recovery!.snapshot).toBe('used');
    expect(reopened.recovery!.live).toBe(80);
  });

  it('after a crash: snapshot + tail give the same deliveries, order and counts as a whole-log replay', async () => {
    const dir = tempDir();
    const t0 = Math.ceil(Date.now() / 1000) * 1000;
    const clock = new ManualClock(t0);
    const queue = await track(openQueue(dir, clock, { segmentBytes: 1024 }));
    const ids: string[] = [];
    for (let i = 0; i < 60; i++) {
      ids.push((await queue.schedule({ topic: TOPIC, payload: i, delayMs: 50 * (i % 30) })).id);
    }
    await advance(clock, 600, 100, queue);
    await snapshotNow(queue);
    // The tail: new messages, cancels, reschedules in both directions, deliveries.
    for (let i = 0; i < 30; i++) {
      ids.push((await queue.schedule({ topic: TOPIC, payload: 100 + i, delayMs: 70 * i })).id);
    }
    for (let i = 0; i < 60; i += 7) await queue.cancel(ids[i]);
    for (let i = 3; i < 90; i += 11) await queue.reschedule(ids[i], { delayMs: 900 - 10 * i });
    const taken = await queue.receive(TOPIC, { max: 5 });
    for (const message of taken.slice(0, 3)) await queue.ack(message.receipt);
    await advance(clock, 200, 100, queue);
    const counts = structuredClone(storeOf(queue).counts());

    // The crash: the files as they are; and the same files without the snapshot.
    const image = tempDir();
    cpSync(dir, image, { recursive: true });
    rmSync(join(image, 'LOCK'));
    const plain = tempDir();
    cpSync(image, plain, { recursive: true });
    rmSync(join(plain, SNAPSHOT_FILE));

    const results = [];
    for (const copy of [image, plain]) {
      const later = new ManualClock(clock.now());
      const reopened = await track(openQueue(copy, later));
      const recovery = reopened.recovery!;
      const recovered = structuredClone(storeOf(reopened).counts());
      const got = await consume(reopened, later, 5000);
      await close(reopened);
      results.push({ recovery, recovered, got: got.map((m) => [m.id, m.deliverAt, m.payload]) });
    }
    expect(results[0].recovery.snapshot).toBe('used');
    expect(results[1].recovery.snapshot).toBe('none');
    expect(results[0].recovery.replayedBytes).toBeLessThan(results[1].recovery.replayedBytes);
    expect(results[0].recovery.live).toBe(results[1].recovery.live);
    expect(results[0].recovered).toEqual(results[1].recovered);
    expect(results[0].recovered).toEqual(counts);
    expect(results[0].got).toEqual(results[1].got);
    expect(results[0].got.length).toBeGreaterThan(50);
  });

  it('a message moved before the snapshot and finished after it is not read back at recovery', async () => {
    // Once its finish is durable, its payload's segment may go; reading it back would look like
    // damage. (Regression: recovery read the snapshot's near positions without the tail's
    // changes.)
    const dir = tempDir();
    const t0 = Math.ceil(Date.now() / 1000) * 1000;
    const clock = new ManualClock(t0);
    const queue = await track(openQueue(dir, clock, { segmentBytes: 512 }));
    const filler = () =>
      queue.schedule({ topic: TOPIC, payload: 'y'.repeat(200), delayMs: 60_000 });
    // Alone in segment 1: the next record does not fit.
    const { id } = await queue.schedule({ topic: TOPIC, payload: 'x'.repeat(400), delayMs: 5000 });
    for (let i = 0; i < 2; i++) await filler();
    expect(await queue.reschedule(id, { delayMs: 100 })).toBe(true); // into memory, segment 3
    for (let i = 0; i < 3; i++) await filler();
    await snapshotNow(queue);
    expect(await queue.cancel(id)).toBe(true);
    for (let i = 0; i < 2; i++) await filler();
    await storeOf(queue).checkpoint('never');
    const image = tempDir();
    cpSync(dir, image, { recursive: true });
    rmSync(join(image, 'LOCK'));
    // Segment 1, which held only the cancelled message's payload, is gone; its MOVE is not.
    expect(segmentFiles(image)[0]).toMatch(/0000000002\.seg$/);

    const reopened = await track(openQueue(image, new ManualClock(clock.now())));
    expect(reopened.recovery!.snapshot).toBe('used');
    expect(reopened.recovery!.corrupt).toEqual([]);
    expect(await reopened.get(id)).toBeUndefined();
    expect(reopened.recovery!.live).toBe(7);
  });

  it('keeps the log from the snapshot position on, even when its messages are finished', async () => {
    const dir = tempDir();
    const clock = new ManualClock(Date.now());
    const queue = await track(openQueue(dir, clock, { segmentBytes: 512 }));
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) {
      ids.push((await queue.schedule({ topic: TOPIC, payload: 'p'.repeat(100), delayMs: 1e6 })).id);
    }
    await snapshotNow(queue);
    const position = snapshotPositionOf(dir);
    for (const id of ids) await queue.cancel(id);
    await storeOf(queue).checkpoint('never');
    const kept = segmentFiles(dir).map((file) => Number(file.slice(-14, -4)));
    expect(kept[0]).toBe(Math.floor(position / 2 ** 32));
    // The next snapshot moves the position on, and the finished segments go.
    await snapshotNow(queue);
    await storeOf(queue).checkpoint('never');
    expect(segmentFiles(dir).length).toBe(1);
  });
});

describe('a snapshot that cannot be used: the whole log is replayed, nothing is lost', () => {
  it.each([
    ['a byte flipped in its tables', (size: number) => Math.floor(size * 0.6)],
    ['a byte flipped in its table of contents', () => 20],
    ['a byte flipped in its CRC', (size: number) => size - 2],
    ['its magic', () => 1],
  ])('%s', async (_what, at) => {
    const { dir, clock, payloads } = await populated();
    const file = join(dir, SNAPSHOT_FILE);
    const bytes = readFileSync(file);
    bytes[at(bytes.length)] ^= 0x5a;
    writeFileSync(file, bytes);
    const { recovery, ids } = await deliveredIds(dir, clock, 5000);
    expect(recovery.snapshot).toMatch(/^rejected: /);
    expect(recovery.corrupt).toEqual([]);
    expect(ids).toEqual([...payloads.keys()]);
    // The rejected snapshot is gone; the close wrote a good one.
    const again = await track(openQueue(dir, clock));
    expect(again.recovery!.snapshot).toBe('used');
  });

  it('cut short', async () => {
    const { dir, clock, payloads } = await populated();
    const file = join(dir, SNAPSHOT_FILE);
    truncateSync(file, statSync(file).size - 100);
    const { recovery, ids } = await deliveredIds(dir, clock, 5000);
    expect(recovery.snapshot).toMatch(/^rejected: .*(bytes where|cut short)/);
    expect(ids).toEqual([...payloads.keys()]);
  });

  it('its position is beyond the end of the log (the log was cut back): refused as corruption, not rejected', async () => {
    const { dir, clock } = await populated();
    const [segment] = segmentFiles(dir);
    const records = segmentRecords(segment);
    const last = records[records.length - 1];
    truncateSync(segment, last.offset);
    // The snapshot (and the checkpoint) were written once the log up to there was durable.
    await expect(openQueue(dir, clock)).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_CORRUPT',
      message: expect.stringMatching(/log segment 1 \(bytes \d+ to \d+\) is cut short/),
    });
    expect(existsSync(join(dir, SNAPSHOT_FILE))).toBe(true);
  });

  it('the log segment it continues in is gone: refused as corruption', async () => {
    const { dir, clock } = await populated(40, { segmentBytes: 512 });
    const position = snapshotPositionOf(dir);
    const files = segmentFiles(dir);
    const victim = files.find(
      (file) => Number(file.slice(-14, -4)) === Math.floor(position / 2 ** 32),
    );
    rmSync(victim!);
    await expect(openQueue(dir, clock)).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_CORRUPT',
      message: expect.stringMatching(/is missing/),
    });
  });

  it('without a checkpoint, a segment holding live payloads by the snapshot is gone: refused', async () => {
    const { dir, clock } = await populated(40, { segmentBytes: 512 });
    rmSync(join(dir, 'checkpoint.json'));
    rmSync(segmentFiles(dir)[0]);
    await expect(openQueue(dir, clock)).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_CORRUPT',
      damage: [expect.objectContaining({ segment: 1, reason: 'missing' })],
    });
  });

  it.each([
    ['the checkpoint deleted', (dir: string) => rmSync(join(dir, 'checkpoint.json'))],
    ['an index window deleted', (dir: string) => rmSync(indexFiles(dir)[2])],
    ['an index window cut', (dir: string) => truncateSync(indexFiles(dir)[3], 24)],
  ])('the index it relies on is not whole: %s', async (_what, damage) => {
    const { dir, clock, payloads } = await populated();
    expect(indexFiles(dir).length).toBeGreaterThanOrEqual(4);
    damage(dir);
    const { recovery, ids } = await deliveredIds(dir, clock, 5000);
    expect(recovery.snapshot).toMatch(/^rejected: /);
    expect(ids).toEqual([...payloads.keys()]);
  });

  it('opened with another windowMs', async () => {
    const { dir, clock, payloads } = await populated();
    const queue = await track(openQueue(dir, clock, { windowMs: 250 }));
    expect(queue.recovery!.snapshot).toBe('rejected: written with windowMs 500, opened with 250');
    const got = await consume(queue, clock, 5000);
    expect(got.map((message) => message.id)).toEqual([...payloads.keys()]);
  });

  it.each([1, 99])('another snapshot version (%i)', async (version) => {
    const { dir, clock, payloads } = await populated();
    const file = join(dir, SNAPSHOT_FILE);
    const bytes = readFileSync(file);
    bytes.writeUInt32LE(version, 8);
    writeFileSync(file, bytes);
    const { recovery, ids } = await deliveredIds(dir, clock, 5000);
    expect(recovery.snapshot).toBe(
      `rejected: snapshot version ${version}, this tickwheel reads ${SNAPSHOT_VERSION}`,
    );
    expect(ids).toEqual([...payloads.keys()]);
  });
});

describe('a crash while a snapshot is being written', () => {
  it('the temporary file it leaves is never read, and removed at the next open', async () => {
    const { dir, clock, payloads } = await populated();
    const file = join(dir, SNAPSHOT_FILE);
    writeFileSync(`${file}.tmp`, readFileSync(file).subarray(0, 1000));
    const { recovery, ids } = await deliveredIds(dir, clock, 5000);
    expect(recovery.snapshot).toBe('used');
    expect(existsSync(`${file}.tmp`)).toBe(false);
    expect(ids).toEqual([...payloads.keys()]);
  });

  it('SIGKILL at a random moment while snapshots are written back to back: nothing lost', async () => {
    const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
    const entry = join(root, 'dist', 'delay-queue.js');
    if (!existsSync(entry)) throw new Error(`${entry} is missing: run \`npm run build\``);
    const dir = tempDir();
    const script = `
      const { DelayQueue } = await import(${JSON.stringify(pathToFileURL(entry).href)});
      const queue = await DelayQueue.open({ dir: ${JSON.stringify(dir)}, fsync: 'batch' });
      const batch = [];
      for (let i = 0; i < 20000; i++) {
        batch.push(queue.schedule({ topic: 'snap', payload: { i }, id: 'm' + i, delayMs: 3600000 }));
        if (batch.length === 1000) await Promise.all(batch.splice(0));
      }
      process.stdout.write('ready\\n');
      for (let i = 0; ; i++) {
        await queue.schedule({ topic: 'snap', payload: { i }, delayMs: 3600000 });
        await queue.backend.store.checkpoint('always');
      }
    `;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk) => (stderr += String(chunk)));
    await new Promise<void>((ready, fail) => {
      child.stdout.on('data', (chunk) => String(chunk).includes('ready') && ready());
      child.on('exit', () => fail(new Error(`the writer ended early: ${stderr}`)));
    });
    await new Promise((wait) => setTimeout(wait, 50 + Math.random() * 400));
    child.kill('SIGKILL');
    await new Promise((exited) => child.on('exit', exited));

    // (As the writer opened it: with another windowMs the snapshot would be refused.)
    const clock = new ManualClock(Date.now());
    const queue = await track(openQueue(dir, clock, { windowMs: 60_000, horizonMs: 60_000 }));
    expect(queue.recovery!.snapshot).toMatch(/^(used|none)$/);
    expect(queue.recovery!.corrupt).toEqual([]);
    expect(queue.recovery!.live).toBeGreaterThanOrEqual(20000);
    for (const i of [0, 1, 9999, 19999])
      expect((await queue.get(`m${i}`))?.status).toBe('scheduled');
    const counts = storeOf(queue).counts();
    expect(counts.topics.get('snap')?.pending).toBe(queue.recovery!.live);
  }, 60_000);
});

describe('damage in the log before the snapshot position', () => {
  it('is found when the record is read: that message is skipped with a warning, the rest delivered', async () => {
    const { dir, clock, payloads } = await populated();
    const [segment] = segmentFiles(dir);
    const records = segmentRecords(segment);
    const victim = records[30]; // due at 3.1 s: beyond the horizon, read when its window loads
    const bytes = readFileSync(segment);
    bytes[victim.offset + victim.size - 1] ^= 0xff;
    writeFileSync(segment, bytes);
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.message);
    process.on('warning', onWarning);
    try {
      const { recovery, ids } = await deliveredIds(dir, clock, 5000);
      expect(recovery.snapshot).toBe('used');
      payloads.delete(victim.id!);
      expect(ids).toEqual([...payloads.keys()]);
      expect(warnings.join('\n')).toMatch(/skipped the message at log segment 1 .*CRC mismatch/);
    } finally {
      process.off('warning', onWarning);
    }
  });
});

describe('the on-disk format', () => {
  it('a new directory records it; a directory in another format is refused with ERR_TICKWHEEL_FORMAT', async () => {
    const { dir, clock } = await populated(3);
    expect(JSON.parse(readFileSync(join(dir, 'format.json'), 'utf8'))).toEqual({
      format: STORE_FORMAT,
    });
    writeFileSync(join(dir, 'format.json'), JSON.stringify({ format: STORE_FORMAT + 1 }));
    await expect(openQueue(dir, clock)).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_FORMAT',
      message: expect.stringContaining(`format ${STORE_FORMAT + 1}`),
    });
  });

  it('a directory written before the format was recorded (format 1) is refused', async () => {
    const { dir, clock } = await populated(3);
    rmSync(join(dir, 'format.json'));
    await expect(openQueue(dir, clock)).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_FORMAT',
      message: expect.stringContaining('format 1'),
    });
    // Refused without touching anything: no format file was written.
    expect(existsSync(join(dir, 'format.json'))).toBe(false);
  });
});

function snapshotPositionOf(dir: string): number {
  const bytes = readFileSync(join(dir, SNAPSHOT_FILE));
  const meta = JSON.parse(bytes.toString('latin1', 16, 16 + bytes.readUInt32LE(12))) as {
    position: number;
  };
  return meta.position;
}
