/**
 * The message functions of the tickwheel library (tw_schedule, tw_get, tw_cancel) on a real
 * Valkey: where records go (window or near segment), dedup by id, segments dropped when nothing
 * points into them, counts, and what a far-future message costs in server memory.
 */

import { describe, expect, it } from 'vitest';
import { packRecords } from '../../src/cluster/functions.js';
import { encodeRecord } from '../../src/partitioned/record.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { installed } from '../../scripts/valkey.mjs';
import { withValkey } from './with-valkey.js';
import { waitFor } from '../support/wait-for.js';

const WINDOW_MS = 30_000;
const P = 'tw:{orders:5}:';
const META = `${P}meta`;

interface Message {
  id: string;
  deliverAt: number;
  topic?: string;
  record?: string;
}

function args(messages: Message[]): Array<string | number> {
  const out: Array<string | number> = [messages.length];
  for (const m of messages) {
    out.push(
      m.id,
      m.id === '' ? '' : bucketOf(m.id), // '': the message gets a located id
      String(m.deliverAt),
      String(Math.floor(m.deliverAt / WINDOW_MS)),
      m.topic ?? 'invoice',
      m.record ?? `record of ${m.id}`,
    );
  }
  return out;
}

function bucketOf(id: string): number {
  let h = 0;
  for (let i = 0; i < id.length; i++) h = (h * 31 + id.charCodeAt(i)) % 1024;
  return h;
}

describe.runIf(installed('valkey-server'))('message functions on Valkey', () => {
  const servers = withValkey();
  const scheduleRaw = (messages: Message[]) =>
    servers.valkey.fcall('tw_schedule', META, args(messages));
  /** The reply as {created, due} per message (the reply itself: n, or 1 | a pending due each). */
  const schedule = async (messages: Message[]): Promise<Array<[number, string]>> => {
    const reply = await scheduleRaw(messages);
    return messages.map((m, i) => {
      const entry: unknown = Array.isArray(reply) ? reply[i] : undefined;
      if (typeof entry === 'string') return [0, entry];
      expect(entry ?? reply).toBe(Array.isArray(reply) ? 1 : messages.length);
      return [1, String(m.deliverAt)];
    });
  };
  const get = (id: string) => servers.valkey.fcall('tw_get', META, [id, bucketOf(id)]);
  /** 1 when cancelled (tw_cancel then tells what it was), 0 when there was nothing to. */
  const cancel = async (id: string) =>
    (await servers.valkey.fcall('tw_cancel', META, [id, bucketOf(id)])) === 0 ? 0 : 1;
  const cmd = (...words: string[]) => servers.valkey.command(META, words);
  /** Memory the data takes: all of it less the server's own and the functions' engine. */
  const dataset = async () => {
    const info = String(await cmd('INFO', 'memory'));
    return Number(/used_memory_dataset:(\d+)/.exec(info)?.[1]);
  };

  it('appends a far-future message to its window and keeps its state by id', async () => {
    const deliverAt = 1_900_000_012_345.5;
    const window = String(Math.floor(deliverAt / WINDOW_MS));
    expect(await schedule([{ id: 'o-1001', deliverAt }])).toEqual([[1, String(deliverAt)]]);
    expect(await get('o-1001')).toBe(`S|w${window}|0|${deliverAt}|0|invoice`);
    expect(await cmd('LRANGE', `${P}s:w${window}`, '0', '-1')).toEqual(['record of o-1001']);
    expect(await cmd('ZRANGE', `${P}windows`, '0', '-1')).toEqual([window]);
    expect(await cmd('HGET', `${P}live`, `w${window}`)).toBe('1');
    expect(await cmd('HGET', `${P}counts`, 'invoice|S')).toBe('1');
  });

  it('answers a second schedule of a pending id with the first one, changing nothing', async () => {
    const reply = await scheduleRaw([{ id: 'o-1001', deliverAt: 5, record: 'other' }]);
    expect(reply).toEqual(['1900000012345.5']);
    expect(await cmd('HGET', `${P}counts`, 'invoice|S')).toBe('1');
  });

  it('keeps records of one window in schedule order, at their indexes', async () => {
    const base = 1_900_000_020_000;
    await schedule([
      { id: 'a', deliverAt: base + 3, record: 'AAA' },
      { id: 'b', deliverAt: base + 1, record: 'BB' },
      { id: 'c', deliverAt: base + 2, record: 'C' },
    ]);
    const window = String(Math.floor(base / WINDOW_MS));
    const records = (await cmd('LRANGE', `${P}s:w${window}`, '0', '-1')) as string[];
    expect(records.slice(-3)).toEqual(['AAA', 'BB', 'C']);
    const indexOf = async (id: string) => Number(String(await get(id)).split('|')[2]);
    expect(await indexOf('b')).toBe((await indexOf('a')) + 1);
    expect(await indexOf('c')).toBe((await indexOf('b')) + 1);
    expect(records[await indexOf('b')]).toBe('BB');
  });

  it('groups a batch by segment and topic: indexes, counts and dedup as one call at a time', async () => {
    const w1 = 1_990_000_020_000;
    const w2 = w1 + 3 * WINDOW_MS;
    const [win1, win2] = [w1, w2].map((t) => String(Math.floor(t / WINDOW_MS)));
    const countOf = async (topic: string) => Number(await cmd('HGET', `${P}counts`, `${topic}|S`));
    const before = { mail: await countOf('mail'), sms: await countOf('sms') };
    const replies = await scheduleRaw([
      { id: 'g1', deliverAt: w1, topic: 'mail', record: 'G1' },
      { id: 'g2', deliverAt: w2, topic: 'sms', record: 'G2' },
      { id: 'g1', deliverAt: w2 + 5, topic: 'sms', record: 'again' },
      { id: 'g3', deliverAt: w1 + 1, topic: 'mail', record: 'G3' },
      { id: 'g4', deliverAt: w2 + 2, topic: 'mail', record: 'G4' },
    ]);
    // One entry a message when any was a duplicate: 1 if created, else the pending one's due.
    expect(replies).toEqual([1, 1, String(w1), 1, 1]);
    expect(await cmd('LRANGE', `${P}s:w${win1}`, '0', '-1')).toEqual(['G1', 'G3']);
    expect(await cmd('LRANGE', `${P}s:w${win2}`, '0', '-1')).toEqual(['G2', 'G4']);
    expect(await get('g1')).toBe(`S|w${win1}|0|${w1}|0|mail`);
    expect(await get('g3')).toBe(`S|w${win1}|1|${w1 + 1}|0|mail`);
    expect(await get('g2')).toBe(`S|w${win2}|0|${w2}|0|sms`);
    expect(await get('g4')).toBe(`S|w${win2}|1|${w2 + 2}|0|mail`);
    expect(await cmd('HMGET', `${P}live`, `w${win1}`, `w${win2}`)).toEqual(['2', '2']);
    expect(await cmd('ZRANGE', `${P}windows`, win1, win2, 'BYSCORE')).toEqual([win1, win2]);
    expect(await countOf('mail')).toBe(before.mail + 3);
    expect(await countOf('sms')).toBe(before.sms + 1);
    for (const id of ['g1', 'g2', 'g3', 'g4']) expect(await cancel(id)).toBe(1);
    expect(await cmd('EXISTS', `${P}s:w${win1}`, `${P}s:w${win2}`)).toBe(0);
  });

  it('remembers finished ids for get() in two generations of 128 per partition', async () => {
    const base = 1_996_000_000_000;
    const batch = Array.from({ length: 300 }, (_, i) => ({ id: `fin-${i}`, deliverAt: base + i }));
    await cmd('DEL', `${P}done:0`, `${P}done:1`); // what the tests before finished
    await schedule(batch);
    for (const m of batch) expect(await cancel(m.id)).toBe(1);
    // 0-127 went with the first generation once the third began; 128-299 are remembered.
    expect(await get('fin-0')).toBeNull();
    expect(await get('fin-127')).toBeNull();
    const window = String(Math.floor((base + 128) / WINDOW_MS));
    expect(await get('fin-128')).toBe(`C|w${window}|128|${base + 128}|0|invoice`);
    expect(await get('fin-299')).toMatch(/^C\|/);
    expect(await cmd('HLEN', `${P}done:1`)).toBe(128);
    expect(await cmd('HLEN', `${P}done:0`)).toBe(44);
    expect(await cmd('OBJECT', 'ENCODING', `${P}done:1`)).toBe('listpack');
    // Cancelling a finished id again changes nothing; scheduling it again makes a new message.
    expect(await cancel('fin-299')).toBe(0);
    expect((await schedule([{ id: 'fin-299', deliverAt: base }]))[0][0]).toBe(1);
    expect(await get('fin-299')).toMatch(/^S\|/);
    expect(await cancel('fin-299')).toBe(1);
  });

  it('takes a batch of 2,500 to one window in one call', async () => {
    const base = 1_995_000_000_000;
    const window = String(Math.floor(base / WINDOW_MS));
    const batch = Array.from({ length: 2_500 }, (_, i) => ({
      id: `big-${i}`,
      deliverAt: base + (i % 1000),
      record: `R${i}`,
    }));
    const replies = await schedule(batch);
    expect(replies.every(([created]) => created === 1)).toBe(true);
    expect(await cmd('LLEN', `${P}s:w${window}`)).toBe(2_500);
    expect(await get('big-2499')).toBe(`S|w${window}|2499|${base + 499}|0|invoice`);
    expect(await cmd('LINDEX', `${P}s:w${window}`, '1234')).toBe('R1234');
    for (const m of batch) await cancel(m.id);
    expect(await cmd('EXISTS', `${P}s:w${window}`)).toBe(0);
  });

  it('cancels a scheduled message, and drops a window nobody points into', async () => {
    const deliverAt = 1_950_000_000_000;
    const window = String(Math.floor(deliverAt / WINDOW_MS));
    await schedule([
      { id: 'x1', deliverAt },
      { id: 'x2', deliverAt: deliverAt + 1 },
    ]);
    expect(await cancel('x1')).toBe(1);
    expect(await cancel('x1')).toBe(0);
    expect(await cancel('never-was')).toBe(0);
    expect(await get('x1')).toMatch(/^C\|/); // finished: remembered a while
    expect(await cmd('EXISTS', `${P}s:w${window}`)).toBe(1);
    expect(await cancel('x2')).toBe(1);
    expect(await cmd('EXISTS', `${P}s:w${window}`)).toBe(0);
    expect(await cmd('ZSCORE', `${P}windows`, window)).toBeNull();
    expect(await cmd('HEXISTS', `${P}live`, `w${window}`)).toBe(0);
  });

  it('keeps no count field of a topic whose messages all ended', async () => {
    const deliverAt = 1_960_000_000_000;
    const topics = ['order-1', 'order-2', 'order-3'];
    await schedule(topics.map((topic) => ({ id: `t-${topic}`, deliverAt, topic })));
    expect(await cmd('HGET', `${P}counts`, 'order-2|S')).toBe('1');
    for (const topic of topics) expect(await cancel(`t-${topic}`)).toBe(1);
    const left = (await cmd('HKEYS', `${P}counts`)) as string[];
    expect(left.filter((field) => field.startsWith('order-'))).toEqual([]);
  });

  it('sends a message due inside the loaded horizon to the near segment, and says so', async () => {
    await cmd('HSET', META, 'loadedUntil', '1800000000000', 'near', '7');
    const heard: string[] = [];
    const stop = await servers.valkey.subscribe(`${P}ev`, (m) => heard.push(m));
    try {
      await schedule([{ id: 'soon', deliverAt: 1_799_999_999_000, record: 'NEAR' }]);
      expect(await get('soon')).toBe('S|n7|0|1799999999000|0|invoice');
      expect(await cmd('LRANGE', `${P}s:n7`, '0', '-1')).toEqual(['NEAR']);
      await waitFor(() => heard.length > 0);
      // The note names what was appended: segment, first index, then id, bucket, due.
      expect(heard).toEqual([`n n7 0 soon ${bucketOf('soon')} 1799999999000`]);
      // Cancelling it leaves the current near segment in place: its owner reads it by offset.
      expect(await cancel('soon')).toBe(1);
      expect(await cmd('EXISTS', `${P}s:n7`)).toBe(1);
    } finally {
      await stop();
    }
  });

  it('refuses a malformed call without changing anything', async () => {
    await expect(servers.valkey.fcall('tw_schedule', META, [2, 'only-one'])).rejects.toThrow(
      /messages of 6 arguments/,
    );
    // A located run of no record, or of a negative count (which once looped for ever).
    const two = packRecords([Buffer.from([0, 1, 65, 1, 49, 1, 0, 0, 0, 1, 116]), Buffer.from('x')]);
    for (const [k, blob] of [
      [0, two],
      [-6, two],
      [1.5, two],
      [1, two], // two records where one was said
      [3, two], // three said, two there
      [2, two.subarray(0, two.length - 1)], // the last one cut short
    ] as const) {
      await expect(
        servers.valkey.fcall('tw_schedule', META, [
          Math.max(k, 0),
          '',
          1,
          '1000',
          '1999',
          't',
          k,
          blob,
        ]),
      ).rejects.toThrow(/located runs/);
    }
    expect(await cmd('KEYS', `${P}s:w1`)).toEqual([]);
  });

  it('costs under 250 bytes of server memory per pending far-future message (100 B payload)', async () => {
    const payload = 'p'.repeat(100);
    await cmd('FLUSHALL', 'SYNC');
    const before = await dataset();
    const start = 1_900_000_000_000;
    const n = 100_000;
    for (let i = 0; i < n; i += 1_000) {
      const batch: Message[] = [];
      for (let j = i; j < i + 1_000; j++) {
        const id = `order-${String(j).padStart(10, '0')}`;
        // A 16-byte id and a 100-byte payload in a record as the node encodes it (~150 B).
        batch.push({ id, deliverAt: start + j * 997, record: `${id}${'h'.repeat(34)}${payload}` });
      }
      await schedule(batch);
    }
    const after = await dataset();
    const perMessage = (after - before) / n;
    console.log(`server memory per far-future message: ${perMessage.toFixed(1)} B`);
    expect(perMessage).toBeLessThan(250);
  }, 60_000);

  it('costs a located message (no id given) its record and little more (100 B payload)', async () => {
    await cmd('FLUSHALL', 'SYNC');
    const before = await dataset();
    const start = 1_900_000_000_000;
    const n = 100_000;
    let runs = 0;
    let placed = 0;
    for (let i = 0; i < n; i += 1_000) {
      // As a producer sends them: runs of one window each, records without ids.
      const args: Array<string | number | Buffer> = [1_000];
      let run: Buffer[] = [];
      let window = -1;
      const flush = () => {
        if (run.length === 0) return;
        args.push('', window, window * WINDOW_MS, window * WINDOW_MS + WINDOW_MS - 1, 'invoice');
        args.push(run.length, packRecords(run));
        runs++;
        run = [];
      };
      for (let j = i; j < i + 1_000; j++) {
        const deliverAt = start + j * 997;
        if (Math.floor(deliverAt / WINDOW_MS) !== window) {
          flush();
          window = Math.floor(deliverAt / WINDOW_MS);
        }
        // A located record: tag and due time for the id (~136 B in all; windows of ~30
        // records each, so list nodes are far from full).
        run.push(
          encodeRecord(
            {
              id: '',
              topic: 'invoice',
              maxAttempts: 3,
              backoff: undefined,
              payloadKind: 0,
              payload: Buffer.alloc(100, 112),
            },
            0,
            { tag: `tag${String(j).padStart(5, '0')}`, deliverAt },
          ),
        );
      }
      flush();
      const reply = (await servers.valkey.fcall('tw_schedule', META, args)) as [
        number,
        string,
        string[],
      ];
      // No message with an id; for each run, its window's segment and first index.
      expect(reply[0]).toBe(0);
      placed += reply[2].filter((x, k) => k % 2 === 0 && /^w\d+$/.test(String(x))).length;
    }
    expect(placed).toBe(runs);
    expect(await cmd('KEYS', `${P}id:*`)).toEqual([]);
    const perMessage = ((await dataset()) - before) / n;
    console.log(`server memory per located far-future message: ${perMessage.toFixed(1)} B`);
    expect(perMessage).toBeLessThan(200);
  }, 60_000);
});
