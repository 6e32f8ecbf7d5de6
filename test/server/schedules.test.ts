/**
 * The schedule routes (src/server/routes/schedules.ts): create or replace, change, read, list
 * and delete recurring schedules over HTTP; their occurrences arrive as messages; every bad
 * request is a 4xx with a JSON error body.
 */

import { describe, expect, it } from 'vitest';
import { openServer } from './harness.js';

describe('schedule routes', () => {
  it('PUT creates, GET reads and lists, PATCH changes, DELETE removes', async () => {
    const { call } = await openServer();
    const put = await call('PUT', '/v1/schedules/nightly', {
      topic: 'reports',
      cron: '30 2 * * *',
      timezone: 'Europe/Berlin',
      payload: { report: 'sales' },
    });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({
      name: 'nightly',
      topic: 'reports',
      cron: '30 2 * * *',
      timezone: 'Europe/Berlin',
      everyMs: null,
      catchUp: 'latest',
      overlap: 'allow',
      paused: false,
      created: 1,
      skipped: 0,
    });
    expect(put.body.nextAt).toBeGreaterThan(Date.now());
    // The next occurrence is a message already, with the schedule's id for it.
    const message = await call('GET', `/v1/messages/nightly@${put.body.nextAt}`);
    expect(message.body).toMatchObject({ topic: 'reports', status: 'scheduled' });

    const paused = await call('PATCH', '/v1/schedules/nightly', { paused: true });
    expect(paused.body).toMatchObject({ paused: true, nextAt: null });
    const every = await call('PATCH', '/v1/schedules/nightly', {
      paused: false,
      everyMs: 3_600_000,
    });
    expect(every.body).toMatchObject({ everyMs: 3_600_000, cron: null, timezone: null });
    const list = await call('GET', '/v1/schedules');
    expect(list.body.schedules.map((s: { name: string }) => s.name)).toEqual(['nightly']);
    expect((await call('GET', '/v1/schedules/nightly')).body.everyMs).toBe(3_600_000);
    expect((await call('DELETE', '/v1/schedules/nightly')).body).toEqual({ deleted: true });
    expect((await call('GET', '/v1/schedules/nightly')).status).toBe(404);
    expect((await call('DELETE', '/v1/schedules/nightly')).status).toBe(404);
    expect((await call('PATCH', '/v1/schedules/nightly', { paused: true })).status).toBe(404);
  });

  it('an interval schedule delivers its occurrences as messages', async () => {
    const { call } = await openServer();
    const startAt = Date.now() + 300;
    await call('PUT', '/v1/schedules/tick', {
      topic: 'ticks',
      everyMs: 1_000,
      startAt,
      payload: 7,
    });
    const got = await call('POST', '/v1/topics/ticks/receive', { max: 10, waitMs: 3_000 });
    expect(got.body.messages).toHaveLength(1);
    expect(got.body.messages[0]).toMatchObject({ id: `tick@${startAt}`, payload: 7 });
    expect(Date.now()).toBeGreaterThanOrEqual(startAt);
  });

  it('answers bad schedules with a 4xx and a JSON error, creating nothing', async () => {
    const { call } = await openServer();
    const bad: Array<[string, string, unknown, number]> = [
      ['PUT', '/v1/schedules/a', { topic: 't' }, 400],
      ['PUT', '/v1/schedules/a', { topic: 't', cron: '* * * * *', everyMs: 1000 }, 400],
      ['PUT', '/v1/schedules/a', { topic: 't', cron: '99 * * * *' }, 400],
      ['PUT', '/v1/schedules/a', { topic: 't', cron: '* * * * *', timezone: 'Mars/Base' }, 400],
      ['PUT', '/v1/schedules/a', { topic: 't', everyMs: 5 }, 400],
      ['PUT', '/v1/schedules/a', { topic: 't', everyMs: 1000, catchUp: 'some' }, 400],
      ['PUT', '/v1/schedules/a', { topic: 't', everyMs: 1000, evry: 1 }, 400],
      ['PUT', '/v1/schedules/a', { topic: 't', everyMs: 1000, startAt: 9, endAt: 1 }, 400],
      ['PUT', '/v1/schedules/bad%20name', { topic: 't', everyMs: 1000 }, 400],
      ['PUT', '/v1/schedules/a', 'everyMs=1000', 415],
      ['PATCH', '/v1/schedules/a', { paused: 'yes' }, 400],
    ];
    for (const [method, url, body, status] of bad) {
      const answer = await call(method, url, body);
      expect([method, url, JSON.stringify(body), answer.status]).toEqual([
        method,
        url,
        JSON.stringify(body),
        status,
      ]);
      expect(typeof answer.body.error.code).toBe('string');
      expect(typeof answer.body.error.message).toBe('string');
    }
    expect((await call('GET', '/v1/schedules')).body.schedules).toEqual([]);
  });

  it("answers a new schedule past the queue's maxSchedules with 409 ERR_TICKWHEEL_CONFLICT", async () => {
    const { call } = await openServer({}, { maxSchedules: 2 });
    const spec = { topic: 'ticks', everyMs: 60_000 };
    expect((await call('PUT', '/v1/schedules/a', spec)).status).toBe(200);
    expect((await call('PUT', '/v1/schedules/b', spec)).status).toBe(200);
    const refused = await call('PUT', '/v1/schedules/c', spec);
    expect(refused.status).toBe(409);
    expect(refused.headers['content-type']).toMatch(/^application\/json/);
    expect(refused.body).toEqual({
      error: {
        code: 'ERR_TICKWHEEL_CONFLICT',
        message: expect.stringMatching(
          /^2 recurring schedules exist, the most this queue keeps \(maxSchedules: 2\): delete one before creating recurring schedule c/,
        ) as string,
        outcome: 'none',
      },
    });
    expect((await call('GET', '/v1/schedules/c')).status).toBe(404);
    expect((await call('PUT', '/v1/schedules/a', { ...spec, payload: 1 })).status).toBe(200);
    expect((await call('DELETE', '/v1/schedules/b')).status).toBe(200);
    expect((await call('PUT', '/v1/schedules/c', spec)).status).toBe(200);
  });
});
