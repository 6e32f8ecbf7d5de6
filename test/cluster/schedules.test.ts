/**
 * Recurring schedules on a queue on Valkey (src/partitioned/schedules.ts): any node changes them,
 * the owner of partition 0 runs them, each occurrence is made once (tw_schedule_once), and a
 * leader killed with SIGKILL at a random point is replaced without an occurrence made twice or
 * (with catchUp 'all') missed. Real Valkey, real `tickwheel serve --redis` processes for the
 * kill; real time, every-second schedules.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { QueueEvent } from '../../src/queue/events.js';
import { TickwheelClient } from '../../src/client/index.js';
import { Valkey } from '../../src/valkey/connection.js';
import type { ValkeyDriver } from '../../src/cluster/driver.js';
import type { SchedAnswer, SchedChange } from '../../src/partitioned/driver.js';
import { metaKey } from '../../src/cluster/keys.js';
import type { Producer } from '../../src/partitioned/producer.js';
import { PartitionSchedules, ONCE_MARK_MS } from '../../src/partitioned/schedules.js';
import { DelayQueue } from '../../src/delay-queue.js';
import { nodeOf } from './checking.js';
import type { ScheduleRequest } from '../../src/queue/message.js';
import type { ReceivedMessage } from '../../src/queue/types.js';
import { startServer as startTickwheel, type ServerProcess } from '../server/process.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { installed, startServer } from '../../scripts/valkey.mjs';
import { waitFor } from '../support/wait-for.js';

describe.runIf(installed('valkey-server'))('recurring schedules on Valkey', () => {
  let valkey: { url: string; stop(): Promise<void> };
  const queues: DelayQueue[] = [];
  const servers: ServerProcess[] = [];
  let run = 0;

  beforeAll(async () => {
    valkey = await startServer({ binary: 'valkey-server' });
  }, 30_000);

  afterAll(async () => {
    for (const queue of queues) await queue.close().catch(() => {});
    for (const server of servers) await server.kill();
    await valkey?.stop();
  });

  async function open(queue: string, nodeId?: string): Promise<DelayQueue> {
    const node = await DelayQueue.open({
      redis: valkey.url,
      queue,
      partitions: 4,
      leaseMs: 1_000,
      durability: 'async',
      onError: () => {},
      ...(nodeId === undefined ? {} : { nodeId }),
    });
    queues.push(node);
    return node;
  }

  /** An occurrence as the leader makes one: made at most once while its mark lives. */
  function scheduleOnce(node: DelayQueue, request: ScheduleRequest, markMs: number) {
    const { producer } = nodeOf(node) as unknown as { producer: Producer };
    return producer.scheduleOnce(request, markMs);
  }

  /** Waits until one of `nodes` leads the schedules; returns it. */
  async function leaderOf(nodes: DelayQueue[], timeoutMs = 10_000): Promise<DelayQueue> {
    return waitFor(
      () => {
        const leading = nodes.filter((node) => nodeOf(node).schedules.leading);
        return leading.length === 1 ? leading[0] : undefined;
      },
      { timeoutMs, intervalMs: 50, what: 'one leader' },
    );
  }

  it('any node puts, reads, changes and deletes; the leader makes each occurrence', async () => {
    const name = `api-${run++}`;
    const a = await open(name);
    const b = await open(name);
    const leader = await leaderOf([a, b]);
    const other = leader === a ? b : a;
    // Made through the node that does not lead: the leader picks it up.
    const made = await other.putSchedule('tick', {
      topic: 'ticks',
      everyMs: 1_000,
      payload: { v: 1 },
    });
    expect(made).toMatchObject({ name: 'tick', topic: 'ticks', everyMs: 1_000, created: 0 });
    expect(await leader.getSchedule('tick')).toMatchObject({ name: 'tick', payload: { v: 1 } });
    const got: ReceivedMessage[] = [];
    while (got.length < 2) {
      got.push(...(await other.receive('ticks', { max: 10, waitMs: 3_000 })));
    }
    for (const message of got) {
      expect(message.id).toMatch(/^tick@\d+$/);
      expect(message.payload).toEqual({ v: 1 });
      expect(Date.now()).toBeGreaterThanOrEqual(message.deliverAt);
      await other.ack(message.receipt);
    }
    expect(Number(got[1].id.split('@')[1]) - Number(got[0].id.split('@')[1])).toBe(1_000);
    // A change through the leader this time; the next occurrences carry it.
    await leader.updateSchedule('tick', { payload: { v: 2 } });
    let changed: ReceivedMessage | undefined;
    const until = Date.now() + 10_000;
    while (changed === undefined && Date.now() < until) {
      for (const message of await other.receive('ticks', { max: 10, waitMs: 2_000 })) {
        await other.ack(message.receipt);
        if ((message.payload as { v: number }).v === 2) changed = message;
      }
    }
    expect(changed).toBeDefined();
    expect((await other.listSchedules()).map((s) => [s.name, s.created > 0])).toEqual([
      ['tick', true],
    ]);
    // Deleted through either node: no occurrence after it (the one made ahead is cancelled, and
    // that node reports the cancel).
    const cancelled: string[] = [];
    other.events.on('cancelled', (event: QueueEvent) => cancelled.push(event.id));
    expect(await other.deleteSchedule('tick')).toBe(true);
    await waitFor(() => cancelled.length > 0);
    expect(cancelled).toEqual([expect.stringMatching(/^tick@\d+$/)]);
    expect(await other.deleteSchedule('tick')).toBe(false);
    expect(await leader.getSchedule('tick')).toBeUndefined();
    // A message due after two more of its intervals: nothing of the schedule comes before it.
    await other.schedule({ topic: 'ticks', id: 'marker', payload: 'marker', delayMs: 2_500 });
    const after: string[] = [];
    await waitFor(
      async () => {
        for (const message of await other.receive('ticks', { max: 10, waitMs: 1_000 })) {
          after.push(message.id);
          await other.ack(message.receipt);
        }
        return after.includes('marker');
      },
      { timeoutMs: 15_000 },
    );
    expect(after).toEqual(['marker']);
    // Bad specs are refused as on the embedded queue.
    await expect(other.putSchedule('bad', { topic: 't', cron: 'nope' })).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_OPTION',
    });
    await expect(other.putSchedule('bad name!', { topic: 't', everyMs: 1_000 })).rejects.toThrow();
  }, 40_000);

  it('an occurrence is made once while its mark lives, acked or not; a cancel frees it', async () => {
    const node = await open(`once-${run++}`);
    const request = { topic: 'o', id: 'sched@1000', payload: 1 };
    expect(await scheduleOnce(node, request, 60_000)).toBe(true);
    // Pending: not made again (and not a second message).
    expect(await scheduleOnce(node, request, 60_000)).toBe(false);
    const [message] = await node.receive('o', { waitMs: 2_000 });
    expect(message.id).toBe('sched@1000');
    expect(await node.ack(message.receipt)).toBe(true);
    // Acked, and so no longer pending: a plain schedule would make it again; once does not.
    expect(await scheduleOnce(node, request, 60_000)).toBe(false);
    // Nothing of it comes before a message scheduled after it.
    await node.schedule({ topic: 'o', id: 'marker', payload: 0 });
    const next = await node.receive('o', { max: 10, waitMs: 5_000 });
    expect(next.map((m) => m.id)).toEqual(['marker']);
    await node.ack(next[0].receipt);
    expect(await node.receive('o', { max: 10 })).toEqual([]);
    // A cancelled one may be made again (a changed schedule's time, made anew).
    expect(
      await scheduleOnce(node, { ...request, id: 'sched@2000', delayMs: 60_000 }, 60_000),
    ).toBe(true);
    expect(await node.cancel('sched@2000')).toBe(true);
    expect(await scheduleOnce(node, { ...request, id: 'sched@2000' }, 60_000)).toBe(true);
    // The mark runs out: then an acked one may be made again.
    const other = { ...request, id: 'sched@3000' };
    expect(await scheduleOnce(node, other, 50)).toBe(true);
    const taken: string[] = [];
    for (let i = 0; i < 10 && !taken.includes('sched@3000'); i++) {
      for (const m of await node.receive('o', { max: 10, waitMs: 500 })) {
        taken.push(m.id);
        await node.ack(m.receipt);
      }
    }
    expect(taken).toContain('sched@3000');
    // Made again once its 50 ms mark has run out.
    await waitFor(() => scheduleOnce(node, other, 50));
  }, 20_000);

  it('changes made at once through two nodes all land: none is lost', async () => {
    const name = `race-${run++}`;
    const a = await open(name);
    const b = await open(name);
    await a.putSchedule('s', { topic: 't', everyMs: 60_000, payload: 0 });
    // Each changes another field, from alternate nodes, all at once: a write that overwrote
    // one read before another landed would lose that one's field.
    const changes = [
      { maxAttempts: 7 },
      { catchUp: 'none' as const },
      { overlap: 'skip' as const },
      { paused: true },
      { payload: { p: 1 } },
      { backoff: { type: 'fixed' as const, delayMs: 250 } },
    ];
    await Promise.all(changes.map((patch, i) => (i % 2 === 0 ? a : b).updateSchedule('s', patch)));
    expect(await b.getSchedule('s')).toMatchObject({
      maxAttempts: 7,
      catchUp: 'none',
      overlap: 'skip',
      paused: true,
      payload: { p: 1 },
      backoff: { type: 'fixed', delayMs: 250 },
    });
  }, 20_000);

  it('a delete then a put of the same name: the new schedule runs, not the old', async () => {
    const name = `reput-${run++}`;
    const a = await open(name);
    await leaderOf([a]);
    const b = await open(name);
    // Skip overlap: nothing is made before LEAD_MS ahead of the first time.
    await b.putSchedule('job', { topic: 'old', everyMs: 4_000, overlap: 'skip', payload: 'old' });
    await nodeOf(a).schedules.settled();
    await b.deleteSchedule('job');
    await b.putSchedule('job', { topic: 'new', everyMs: 1_000, payload: 'new' });
    await waitFor(async () => (await b.receive('new', { max: 10, waitMs: 1_000 })).length > 0, {
      timeoutMs: 15_000,
    });
    // A window in which the old schedule, had it lived on, would have made its first one.
    expect(await b.receive('old', { max: 10, waitMs: 2_500 })).toEqual([]);
    expect(await b.getSchedule('job')).toMatchObject({ topic: 'new', everyMs: 1_000 });
  }, 30_000);

  it('a delete whose node never cancelled the occurrence made ahead: the leader cancels it', async () => {
    const queue = `orphan-${run++}`;
    const node = await open(queue);
    await leaderOf([node]);
    await node.putSchedule('job', { topic: 't', everyMs: 60_000, payload: 'p' });
    await nodeOf(node).schedules.settled();
    const ahead = (await node.getSchedule('job'))?.lastAt;
    expect(ahead).toBeGreaterThan(Date.now());
    const occurrence = `job@${ahead}`;
    expect((await node.get(occurrence))?.status).toBe('scheduled');
    // The record deleted as a node's delete writes it, and nothing more: that node's durability
    // wait failed after the write, or it died before its cancel.
    const key = `tw:{${queue}:0}:sched`;
    const raw = await Valkey.connect(valkey.url, 5_000);
    try {
      const stored = String(await raw.command(key, ['HGET', key, 'job']));
      const version = stored.slice(0, stored.indexOf('|'));
      expect(await raw.fcall('tw_sched', metaKey(queue, 0), ['del', 'job', version])).toEqual([
        1, 0,
      ]);
    } finally {
      await raw.close();
    }
    await nodeOf(node).schedules.settled();
    expect(await node.getSchedule('job')).toBeUndefined();
    expect((await node.get(occurrence))?.status).toBe('cancelled');
  }, 20_000);

  it('many changes through one node all land; a bad patch is refused as embedded', async () => {
    const node = await open(`many-${run++}`);
    await node.putSchedule('s', { topic: 't', everyMs: 60_000, payload: 0 });
    const results = await Promise.allSettled(
      Array.from({ length: 30 }, (_, i) => node.updateSchedule('s', { payload: i + 1 })),
    );
    expect(results.filter((r) => r.status === 'rejected')).toEqual([]);
    // One at a time, in the order made: the last one's payload stays.
    expect((await node.getSchedule('s'))?.payload).toBe(30);
    await expect(node.updateSchedule('none', null as never)).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_OPTION',
    });
  }, 20_000);

  it('one record that cannot be read is reported once; the other schedules run', async () => {
    const errors: unknown[] = [];
    const queue = `corrupt-${run++}`;
    const node = await DelayQueue.open({
      redis: valkey.url,
      queue,
      partitions: 2,
      leaseMs: 1_000,
      durability: 'async',
      onError: (err) => errors.push(err),
    });
    queues.push(node);
    await leaderOf([node]);
    const key = `tw:{${queue}:0}:sched`;
    const raw = await Valkey.connect(valkey.url, 5_000);
    try {
      await raw.command(key, ['HSET', key, 'odd', '1|{"name":"odd"']);
    } finally {
      await raw.close();
    }
    await node.putSchedule('fine', { topic: 't', everyMs: 1_000, payload: 1 });
    await waitFor(async () => (await node.receive('t', { max: 10, waitMs: 1_000 })).length > 0, {
      timeoutMs: 15_000,
    });
    expect((await node.listSchedules()).map((s) => s.name)).toEqual(['fine']);
    const corrupt = errors.filter((e) => (e as { code?: string }).code === 'ERR_TICKWHEEL_CORRUPT');
    expect(corrupt).toHaveLength(1);
  }, 20_000);

  it('a stale leader (an earlier epoch, its clock not yet run out) cancels nothing', async () => {
    const queue = `stale-${run++}`;
    const node = await open(queue);
    await leaderOf([node]);
    await node.putSchedule('beat', { topic: 'beats', everyMs: 1_000, payload: 'x' });
    // The leader is under way: its first occurrence came due, and the next one is made ahead.
    await waitFor(async () => ((await node.getSchedule('beat'))?.created ?? 0) >= 2);
    const inner = nodeOf(node) as unknown as {
      driver: ValkeyDriver;
      nodeId: string;
      producer: {
        scheduleOnce(request: ScheduleRequest, ms: number): Promise<boolean>;
        cancelGiving(id: string): Promise<unknown>;
        sched(change: SchedChange, what: string): Promise<SchedAnswer>;
      };
    };
    const meta = metaKey(queue, 0);
    const epoch = Number(await inner.driver.valkey.command(meta, ['HGET', meta, 'epoch']));
    const cancelled: string[] = [];
    // The holder before the current one, still running and believing it leads: whatever it
    // makes is refused by the once marks, and its writes are fenced.
    const stale = new PartitionSchedules(inner.driver, 100, {
      node: inner.nodeId,
      onError: () => {},
      schedule: async (request) => {
        await inner.producer.scheduleOnce(request, ONCE_MARK_MS);
      },
      cancel: async (id) => {
        cancelled.push(id);
        return (await inner.producer.cancelGiving(id)) !== undefined;
      },
      isLive: async () => false,
      sched: (change, what) => inner.producer.sched(change, what),
      leads: () => true,
    });
    stale.lead(epoch - 1);
    const received: string[] = [];
    const until = Date.now() + 4_500;
    while (Date.now() < until) {
      for (const m of await node.receive('beats', { max: 10, waitMs: 500 })) {
        received.push(m.id);
        await node.ack(m.receipt);
      }
    }
    await stale.close();
    expect(cancelled).toEqual([]);
    const times = [...new Set(received.map((id) => Number(id.split('@')[1])))].sort(
      (x, y) => x - y,
    );
    expect(times.length).toBeGreaterThan(3);
    for (let i = 1; i < times.length; i++) expect(times[i] - times[i - 1]).toBe(1_000);
  }, 30_000);

  it('a leader killed with SIGKILL is replaced: no occurrence twice, none missed', async () => {
    const queue = `kill-${run++}`;
    const serve = async (node: string) => {
      const server = await startTickwheel(
        [
          '--redis',
          valkey.url,
          '--queue',
          queue,
          '--partitions',
          '4',
          '--node-id',
          node,
          '--durability',
          'async',
        ],
        { timeoutMs: 30_000 },
      );
      servers.push(server);
      return server;
    };
    const nodes = new Map<string, ServerProcess>();
    for (const node of ['s-a', 's-b', 's-c']) nodes.set(node, await serve(node));
    const client = (node: string) => new TickwheelClient({ url: nodes.get(node)!.url });
    await client('s-a').putSchedule('beat', {
      topic: 'beats',
      everyMs: 1_000,
      catchUp: 'all',
      payload: 'x',
    });
    const received: Array<{ id: string; attempts: number; at: number; deliverAt: number }> = [];
    const take = async (node: string, ms: number) => {
      const until = Date.now() + ms;
      const c = client(node);
      while (Date.now() < until) {
        const got = await c.receive('beats', { max: 10, waitMs: 500 });
        const at = Date.now();
        for (const m of got) {
          received.push({ id: m.id, attempts: m.attempts, at, deliverAt: m.deliverAt });
          await c.ack(m.receipt);
        }
      }
      await c.close();
    };
    await take('s-b', 2_500 + Math.floor(Math.random() * 2_000));
    // The leader is the owner of partition 0.
    const dashboard = (await (await fetch(`${nodes.get('s-b')!.url}/v1/dashboard`)).json()) as {
      cluster: { nodes: Array<{ node: string; partitions: number[] }> };
    };
    const leader = dashboard.cluster.nodes.find((n) => n.partitions.includes(0))!.node;
    await nodes.get(leader)!.kill();
    const survivor = [...nodes.keys()].find((n) => n !== leader)!;
    await take(survivor, 7_000);
    await client(survivor).deleteSchedule('beat');
    const times = received.map((r) => Number(r.id.split('@')[1]));
    // Each occurrence made once: never a first delivery twice for one id.
    const firsts = received.filter((r) => r.attempts === 1).map((r) => r.id);
    expect(new Set(firsts).size).toBe(firsts.length);
    // None missed: every second from the first to the last (catchUp 'all' after the takeover).
    const unique = [...new Set(times)].sort((x, y) => x - y);
    expect(unique.length).toBeGreaterThan(6);
    for (let i = 1; i < unique.length; i++) expect(unique[i] - unique[i - 1]).toBe(1_000);
    // None early.
    for (const r of received) expect(r.at).toBeGreaterThanOrEqual(r.deliverAt);
  }, 90_000);
});
