/**
 * /metrics as Prometheus reads it: every sample belongs to a family whose TYPE allows it, and
 * names follow the conventions `promtool check metrics` lints (checked with promtool 2.42 by
 * hand: it passes, where it rejected the quantile-labelled gauge), lateness is a summary with _sum and _count taken
 * from the queue's own measurements, and a message scheduled with a due time in the past is
 * not counted as late by how far in the past that was.
 */

import { describe, expect, it, vi } from 'vitest';
import { ManualClock } from '../../src/index.js';
import { MemoryStore } from '../../src/delay-queue.js';
import { startReceiver } from '../queue/push-receiver.js';
import { openServer } from './harness.js';
import { waitFor } from '../support/wait-for.js';

interface Family {
  type: string;
  help: boolean;
  samples: Array<{ name: string; labels: Record<string, string>; value: number }>;
}

/** A strict reader of the text exposition format (version 0.0.4). */
function parseExposition(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  const suffixes: Record<string, string[]> = {
    counter: [''],
    gauge: [''],
    untyped: [''],
    histogram: ['_bucket', '_sum', '_count'],
    summary: ['', '_sum', '_count'],
  };
  const familyOf = (name: string) => {
    for (const [family, { type }] of families) {
      if (suffixes[type].some((suffix) => family + suffix === name)) return family;
    }
    throw new Error(`sample ${name} has no TYPE line before it`);
  };
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const meta = /^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$/.exec(line);
    if (meta !== null) {
      const [, kind, name, rest] = meta;
      const family = families.get(name) ?? { type: 'untyped', help: false, samples: [] };
      if (kind === 'TYPE') {
        if (!(rest in suffixes)) throw new Error(`unknown type in: ${line}`);
        if (family.samples.length > 0) throw new Error(`TYPE after samples: ${line}`);
        family.type = rest;
      } else family.help = true;
      families.set(name, family);
      continue;
    }
    if (line.startsWith('#')) continue;
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: \d+)?$/.exec(line);
    if (sample === null) throw new Error(`not a sample line: ${line}`);
    const [, name, labelText = '', valueText] = sample;
    const labels: Record<string, string> = {};
    for (const pair of labelText.match(/[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*"/g) ?? []) {
      const at = pair.indexOf('=');
      labels[pair.slice(0, at)] = pair.slice(at + 2, -1);
    }
    // Prometheus parses values with Go's ParseFloat: Inf and NaN in any case.
    const special: Record<string, number> = { '+inf': Infinity, inf: Infinity, '-inf': -Infinity };
    const value = special[valueText.toLowerCase()] ?? Number(valueText);
    if (Number.isNaN(value) && valueText.toLowerCase() !== 'nan') {
      throw new Error(`bad value: ${line}`);
    }
    const family = families.get(familyOf(name)) as Family;
    family.samples.push({ name, labels, value });
  }
  for (const [name, family] of families) {
    // What `promtool check metrics` lints besides the format itself.
    if (!family.help) throw new Error(`${name} has no HELP`);
    if (family.type === 'counter' && !name.endsWith('_total')) {
      throw new Error(`counter ${name} should end in _total`);
    }
    if (family.type !== 'counter' && name.endsWith('_total')) {
      throw new Error(`non-counter ${name} should not end in _total`);
    }
    const plain = family.samples.filter((s) => s.name === name);
    if (family.type === 'gauge' || family.type === 'counter') {
      for (const s of plain) {
        if ('quantile' in s.labels || 'le' in s.labels) {
          throw new Error(`${family.type} ${name} has a quantile or le label`);
        }
      }
    }
    if (family.type === 'summary' || family.type === 'histogram') {
      for (const suffix of ['_sum', '_count']) {
        if (!family.samples.some((s) => s.name === name + suffix) && family.samples.length > 0) {
          throw new Error(`${family.type} ${name} has no ${suffix}`);
        }
      }
      if (family.type === 'summary') {
        for (const s of plain) {
          const q = Number(s.labels.quantile);
          if (!(q >= 0 && q <= 1)) throw new Error(`summary ${name} sample without a quantile`);
        }
      } else {
        const buckets = family.samples.filter((s) => s.name === `${name}_bucket`);
        if (family.samples.length > 0 && !buckets.some((s) => s.labels.le === '+Inf')) {
          throw new Error(`histogram ${name} has no +Inf bucket`);
        }
      }
    }
  }
  return families;
}

describe('GET /metrics', () => {
  it('is valid exposition: TYPE lines match their samples, summaries have _sum and _count', async () => {
    const { call } = await openServer();
    for (let i = 0; i < 5; i++) await call('POST', '/v1/topics/t/messages', { payload: i });
    const got = await call('POST', '/v1/topics/t/receive', { max: 5, waitMs: 1000 });
    expect(got.body.messages.length).toBeGreaterThan(0);
    const families = parseExposition((await call('GET', '/metrics')).text);

    const fire = families.get('tickwheel_fire_lateness_seconds');
    expect(fire?.type).toBe('summary');
    const byName = (name: string) => fire?.samples.find((s) => s.name === name)?.value;
    const fired = families.get('tickwheel_messages_fired_total')?.samples[0].value;
    expect(fired).toBeGreaterThanOrEqual(got.body.messages.length);
    expect(byName('tickwheel_fire_lateness_seconds_count')).toBe(fired);
    expect(byName('tickwheel_fire_lateness_seconds_sum')).toBeGreaterThanOrEqual(0);
    expect(
      fire?.samples
        .filter((s) => s.name === 'tickwheel_fire_lateness_seconds')
        .map((s) => s.labels.quantile),
    ).toEqual(['0.5', '0.99', '1']);

    const delivery = families.get('tickwheel_delivery_lateness_seconds');
    expect(delivery?.type).toBe('histogram');
    expect(
      delivery?.samples.find((s) => s.name === 'tickwheel_delivery_lateness_seconds_count')?.value,
    ).toBe(got.body.messages.length);
  });

  it('counts push attempts by topic and outcome, across a change of the target', async () => {
    let answered = 0;
    const receiver = await startReceiver(() =>
      answered++ % 2 === 0 ? { status: 200 } : { status: 500 },
    );
    try {
      const { call } = await openServer({}, { push: { allow: ['127.0.0.1'] } });
      const push = { url: receiver.url, secret: 'metrics-push-secret-0123', concurrency: 1 };
      await call('PATCH', '/v1/topics/hooks', { push });
      for (let i = 0; i < 2; i++) {
        await call('POST', '/v1/topics/hooks/messages', { payload: i, maxAttempts: 1 });
      }
      await receiver.waitFor(2);
      // A new target: the counts go on from where they were.
      await call('PATCH', '/v1/topics/hooks', { push: { ...push, concurrency: 2 } });
      for (let i = 0; i < 2; i++) {
        await call('POST', '/v1/topics/hooks/messages', { payload: i, maxAttempts: 1 });
      }
      await receiver.waitFor(4);
      const count = async (outcome: string) => {
        const families = parseExposition((await call('GET', '/metrics')).text);
        const family = families.get('tickwheel_push_requests_total');
        expect(family?.type).toBe('counter');
        return family?.samples.find(
          (s) => s.labels.topic === 'hooks' && s.labels.outcome === outcome,
        )?.value;
      };
      await waitFor(
        async () => ((await count('succeeded')) ?? 0) + ((await count('failed')) ?? 0) >= 4,
      );
      expect(await count('succeeded')).toBe(2);
      expect(await count('failed')).toBe(2);
      const families = parseExposition((await call('GET', '/metrics')).text);
      expect(families.get('tickwheel_push_in_flight')?.samples).toEqual([
        { name: 'tickwheel_push_in_flight', labels: { topic: 'hooks' }, value: 0 },
      ]);
    } finally {
      await receiver.close();
    }
  });

  it('labels the first metricsTopics topics seen among the largest and sums the rest under topic="_other"', async () => {
    const { call } = await openServer({ metricsTopics: 2 });
    const scheduled = async (topic: string, count: number) => {
      for (let i = 0; i < count; i++) {
        await call('POST', `/v1/topics/${topic}/messages`, { payload: i, delayMs: 60_000 });
      }
    };
    await scheduled('a', 1);
    await scheduled('b', 2);
    // Seen at this scrape: a and b take the two labels.
    const first = parseExposition((await call('GET', '/metrics')).text);
    const scheduledOf = (families: Map<string, Family>) =>
      Object.fromEntries(
        (families.get('tickwheel_messages')?.samples ?? [])
          .filter((s) => s.labels.state === 'scheduled')
          .map((s) => [s.labels.topic, s.value]),
      );
    expect(scheduledOf(first)).toEqual({ a: 1, b: 2 });
    // Many more topics: all summed under one label; b keeps its own, being among the two
    // largest; a, no longer among them, is summed too; c is among them but came too late for a
    // label.
    for (let t = 0; t < 50; t++) await scheduled(`invented-${t}`, 1);
    await scheduled('c', 3);
    const second = parseExposition((await call('GET', '/metrics')).text);
    expect(scheduledOf(second)).toEqual({ b: 2, _other: 54 });
    const labels = new Set(second.get('tickwheel_messages')?.samples.map((s) => s.labels.topic));
    expect([...labels].sort()).toEqual(['_other', 'b']);
    // a among the two largest again: its label is back.
    await scheduled('a', 4);
    const third = parseExposition((await call('GET', '/metrics')).text);
    expect(scheduledOf(third)).toEqual({ a: 5, _other: 55 });
  });

  it('shows a stopped store as tickwheel_store_stopped 1', async () => {
    const gauge = async (store: MemoryStore) => {
      const { call } = await openServer({}, { store });
      const text = (await call('GET', '/metrics')).text;
      return parseExposition(text).get('tickwheel_store_stopped')?.samples[0]?.value;
    };
    // What a store says in stats() once a log write failed (file-store.ts).
    class StoppedStore extends MemoryStore {
      override stats() {
        return { ...super.stats(), stopped: 1 };
      }
    }
    expect(await gauge(new MemoryStore())).toBe(0);
    expect(await gauge(new StoppedStore())).toBe(1);
  });

  it('refuses a metricsTopics out of bounds', async () => {
    await expect(openServer({ metricsTopics: 0 })).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_OPTION',
    });
  });

  it('parses before any message fired (no quantiles yet, _count 0)', async () => {
    const { call } = await openServer();
    const fire = parseExposition((await call('GET', '/metrics')).text).get(
      'tickwheel_fire_lateness_seconds',
    );
    expect(fire?.type).toBe('summary');
    expect(fire?.samples.find((s) => s.name.endsWith('_count'))?.value).toBe(0);
  });

  it('counts lateness from when a message was scheduled if its deliverAt was long past', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const { call } = await openServer({}, { clock });
    const yearAgo = clock.now() - 326 * 86_400_000;
    const scheduled = await call('POST', '/v1/topics/t/messages', {
      payload: 1,
      deliverAt: yearAgo,
    });
    expect(scheduled.body.deliverAt).toBe(yearAgo);
    clock.advance(3);
    const got = await call('POST', '/v1/topics/t/receive', {});
    expect(got.body.messages).toHaveLength(1);
    expect(got.body.messages[0].deliverAt).toBe(yearAgo);

    const stats = (await call('GET', '/v1/stats')).body;
    expect(stats.latenessMs.max).toBeLessThan(1000);
    const families = parseExposition((await call('GET', '/metrics')).text);
    const sum = (name: string) =>
      families.get(name)?.samples.find((s) => s.name === `${name}_sum`)?.value as number;
    expect(sum('tickwheel_fire_lateness_seconds')).toBeLessThan(1);
    // Handed over 3 ms (of the queue's clock) after it was scheduled.
    expect(sum('tickwheel_delivery_lateness_seconds')).toBeCloseTo(0.003, 3);
  });

  it("measures delivery lateness on the queue's clock, not the server's", async () => {
    const clock = new ManualClock(Date.UTC(2030, 0, 1));
    const { call } = await openServer({}, { clock });
    await call('POST', '/v1/topics/t/messages', { payload: 1, delayMs: 100 });
    clock.advance(150);
    const got = await call('POST', '/v1/topics/t/receive', {});
    expect(got.body.messages).toHaveLength(1);
    const families = parseExposition((await call('GET', '/metrics')).text);
    const delivery = families.get('tickwheel_delivery_lateness_seconds');
    expect(delivery?.samples.find((s) => s.name.endsWith('_sum'))?.value).toBeCloseTo(0.05, 3);
    // A ManualClock fires timers at their due time exactly: ready on time, handed over 50 ms on.
    const fire = families.get('tickwheel_fire_lateness_seconds');
    expect(fire?.samples.find((s) => s.name.endsWith('_sum'))?.value).toBe(0);
  });
});

describe('PATCH /v1/messages/:id', () => {
  it('answers the deliverAt the queue stored (delays round up, times down)', async () => {
    const clock = new ManualClock(Date.UTC(2030, 0, 1));
    const { call, queue } = await openServer({}, { clock });
    await call('POST', '/v1/topics/t/messages', { payload: 1, id: 'm', delayMs: 60_000 });
    const now = clock.now();
    for (const [when, expected] of [
      [{ delayMs: 1500.7 }, now + 1501],
      [{ delayMs: -5 }, now],
      [{ deliverAt: now + 2000.9 }, now + 2000],
    ] as const) {
      const res = await call('PATCH', '/v1/messages/m', when);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ rescheduled: true, deliverAt: expected });
      expect((await queue.get('m'))?.deliverAt).toBe(expected);
    }
  });

  it('answers what it stored even if the message is gone by the time it answers', async () => {
    const clock = new ManualClock(Date.UTC(2030, 0, 1));
    const { call, queue } = await openServer({}, { clock });
    await call('POST', '/v1/topics/t/messages', { payload: 1, id: 'm', delayMs: 60_000 });
    // As if a cancel, or a delivery and an ack, came right after the move.
    vi.spyOn(queue, 'get').mockResolvedValue(undefined);
    const patched = await call('PATCH', '/v1/messages/m', { delayMs: 5000 });
    expect(patched.body).toEqual({ rescheduled: true, deliverAt: clock.now() + 5000 });
  });
});
