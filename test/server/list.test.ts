/**
 * GET /v1/topics/:topic/messages and the client's list() / listAll(), against a real
 * `tickwheel serve` (dist/) with a data directory.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TickwheelClient } from '../../src/client/index.js';
import { startServer, type ServerProcess } from './process.js';
import { useTempDirs } from '../support/temp-dir.js';

const tempDir = useTempDirs('list');

/** Due times far enough ahead that nothing is delivered while the tests run. */
const BASE = Date.now() + 3_600_000;

describe('GET /v1/topics/:topic/messages on a real server', () => {
  let server: ServerProcess;
  let client: TickwheelClient;

  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the JSON of the answers
  async function get(path: string): Promise<{ status: number; json: any }> {
    const response = await fetch(`${server.url}${path}`);
    return { status: response.status, json: await response.json() };
  }

  beforeAll(async () => {
    server = await startServer(['--dir', tempDir()]);
    client = new TickwheelClient({ url: server.url });
    // Scheduled out of order: the list is in due-time order, not in the order of scheduling.
    for (const i of [3, 0, 6, 1, 5, 2, 4]) {
      await client.schedule({ topic: 'jobs', id: `m${i}`, payload: i, deliverAt: BASE + i * 1000 });
    }
    await client.schedule({ topic: 'other', id: 'o1', payload: 0, deliverAt: BASE });
  });

  afterAll(async () => {
    await client?.close();
    await server?.kill();
  });

  it('answers pages in due-time order, chained by the cursor, the last without one', async () => {
    const ids: string[] = [];
    let path = '/v1/topics/jobs/messages?limit=3';
    let pages = 0;
    for (;;) {
      const { status, json } = await get(path);
      expect(status).toBe(200);
      pages++;
      for (const message of json.messages) {
        expect(message).toEqual({
          id: message.id,
          topic: 'jobs',
          status: 'scheduled',
          deliverAt: BASE + Number(message.id.slice(1)) * 1000,
          attempts: 0,
        });
        ids.push(message.id);
      }
      if (json.cursor === undefined) break;
      expect(json.messages).toHaveLength(3);
      path = `/v1/topics/jobs/messages?limit=3&cursor=${json.cursor}`;
    }
    expect(ids).toEqual(['m0', 'm1', 'm2', 'm3', 'm4', 'm5', 'm6']);
    expect(pages).toBe(3);
  });

  it('keeps to [from, until) and to the topic', async () => {
    const { json } = await get(`/v1/topics/jobs/messages?from=${BASE + 2000}&until=${BASE + 5000}`);
    expect(json.messages.map((m: { id: string }) => m.id)).toEqual(['m2', 'm3', 'm4']);
    expect(json.cursor).toBeUndefined();
    expect((await get('/v1/topics/nothing-here/messages')).json).toEqual({ messages: [] });
  });

  it('shows a cancel and a reschedule on the next read', async () => {
    await client.schedule({ topic: 'moves', id: 'a', payload: 0, deliverAt: BASE });
    await client.schedule({ topic: 'moves', id: 'b', payload: 0, deliverAt: BASE + 1000 });
    await client.schedule({ topic: 'moves', id: 'c', payload: 0, deliverAt: BASE + 2000 });
    expect(await client.cancel('b')).toBe(true);
    expect(await client.reschedule('a', { deliverAt: BASE + 5000 })).toBe(true);
    const { json } = await get('/v1/topics/moves/messages');
    expect(
      json.messages.map((m: { id: string; deliverAt: number }) => [m.id, m.deliverAt]),
    ).toEqual([
      ['c', BASE + 2000],
      ['a', BASE + 5000],
    ]);
  });

  it.each([
    ['limit=0', 'querystring/limit must be a whole number from 1 to 1000; got "0"'],
    ['limit=1001', 'querystring/limit must be a whole number from 1 to 1000; got "1001"'],
    ['limit=ten', 'querystring/limit'],
    ['limit=2.5', 'querystring/limit'],
    ['from=-1', 'querystring/from'],
    ['from=yesterday', 'querystring/from'],
    ['until=1e20', 'querystring/until'],
    ['until=12345678901234567', 'querystring/until'],
    ['cursor=', 'querystring/cursor'],
    ['cursor=not%20base64', 'querystring/cursor'],
    [`cursor=${'A'.repeat(1025)}`, 'querystring/cursor'],
    ['after=x', 'querystring'],
  ])('refuses ?%s with a 400 naming %s', async (query, where) => {
    const { status, json } = await get(`/v1/topics/jobs/messages?${query}`);
    expect(status).toBe(400);
    expect(json.error).toMatchObject({ code: 'ERR_TICKWHEEL_INVALID_REQUEST', outcome: 'none' });
    expect(json.error.message).toContain(where);
  });

  it("refuses what only the queue can check: until before from, another topic's cursor, a forged one", async () => {
    const backwards = await get(`/v1/topics/jobs/messages?from=${BASE}&until=${BASE - 1}`);
    expect(backwards.status).toBe(400);
    expect(backwards.json.error).toMatchObject({ code: 'ERR_TICKWHEEL_INVALID_OPTION' });
    expect(backwards.json.error.message).toContain('until');

    const { json: page } = await get('/v1/topics/jobs/messages?limit=1');
    const foreign = await get(`/v1/topics/other/messages?cursor=${page.cursor}`);
    expect(foreign.status).toBe(400);
    expect(foreign.json.error).toMatchObject({ code: 'ERR_TICKWHEEL_INVALID_OPTION' });
    expect(foreign.json.error.message).toContain('cursor of topic "jobs"');

    const forged = await get('/v1/topics/jobs/messages?cursor=bm90LWpzb24');
    expect(forged.status).toBe(400);
    expect(forged.json.error).toMatchObject({ code: 'ERR_TICKWHEEL_INVALID_OPTION' });
  });

  it('is described in /openapi.json with its query and answer', async () => {
    const { json } = await get('/openapi.json');
    const operation = json.paths['/v1/topics/{topic}/messages'].get;
    expect(operation.operationId).toBe('list');
    expect(
      operation.parameters.map((p: { name: string; in: string }) => `${p.in}:${p.name}`),
    ).toEqual(
      expect.arrayContaining([
        'path:topic',
        'query:from',
        'query:until',
        'query:limit',
        'query:cursor',
      ]),
    );
    expect(Object.keys(operation.responses)).toEqual(expect.arrayContaining(['200', '400']));
  });

  it('the client lists a page, and listAll walks every page', async () => {
    const page = await client.list({ topic: 'jobs', limit: 4 });
    expect(page.messages.map((m) => m.id)).toEqual(['m0', 'm1', 'm2', 'm3']);
    const next = await client.list({ topic: 'jobs', limit: 4, cursor: page.cursor });
    expect(next).toEqual({
      messages: [4, 5, 6].map((i) => expect.objectContaining({ id: `m${i}` })),
    });
    const all: string[] = [];
    for await (const message of client.listAll({ topic: 'jobs', limit: 2, from: BASE + 1000 })) {
      all.push(message.id);
    }
    expect(all).toEqual(['m1', 'm2', 'm3', 'm4', 'm5', 'm6']);
  });

  it('asks for the next page only when the loop gets to it', async () => {
    let requests = 0;
    const counting = new TickwheelClient({
      url: server.url,
      fetch: (input, init) => {
        requests++;
        return fetch(input, init);
      },
    });
    for await (const message of counting.listAll({ topic: 'jobs', limit: 2 })) {
      expect(message.id).toBe('m0');
      break;
    }
    expect(requests).toBe(1);
    await counting.close();
  });
});
