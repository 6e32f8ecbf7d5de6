/**
 * A receive answer is bounded by payload bytes as well as by count: many large ready messages
 * give a 200 with what fits, never a 500, and the rest stay ready with no attempt used.
 */

import { describe, expect, it } from 'vitest';
import { openServer } from './harness.js';
import { waitFor } from '../support/wait-for.js';

describe('POST /v1/topics/:topic/receive with large payloads', () => {
  it('answers what fits in maxBytes (default 8 MiB) and leaves the rest ready, unused', async () => {
    const { call, queue } = await openServer({}, { maxPayloadBytes: 2 * 1024 * 1024 });
    const payload = 'x'.repeat(1024 * 1024 - 16); // ~1 MiB of JSON each
    const ids: string[] = [];
    for (let i = 0; i < 30; i++) {
      ids.push((await queue.schedule({ topic: 'big', payload, delayMs: 0 })).id);
    }
    await waitFor(async () => (await queue.get(ids[ids.length - 1]))?.status === 'ready');

    const first = await call('POST', '/v1/topics/big/receive', { max: 1000 });
    expect(first.status).toBe(200);
    expect(first.body.messages.map((m: { id: string }) => m.id)).toEqual(ids.slice(0, 8));
    for (const id of ids.slice(8)) {
      expect(await queue.get(id)).toMatchObject({ status: 'ready', attempts: 0 });
    }

    const second = await call('POST', '/v1/topics/big/receive', { max: 1000, maxBytes: 3_200_000 });
    expect(second.status).toBe(200);
    expect(second.body.messages.map((m: { id: string }) => m.id)).toEqual(ids.slice(8, 11));

    const tooBig = await call('POST', '/v1/topics/big/receive', { maxBytes: 65 * 1024 * 1024 });
    expect(tooBig.status).toBe(400);
    expect(tooBig.body.error.code).toBeDefined();
  });
});

describe('POST /v1/nack with a reason', () => {
  it('keeps the reason as the message lastError, shown with its dead letter', async () => {
    const { call, queue } = await openServer();
    const { id } = await queue.schedule({ topic: 'jobs', payload: 1, maxAttempts: 1 });
    await waitFor(async () => (await queue.get(id))?.status === 'ready');
    const received = await call('POST', '/v1/topics/jobs/receive', {});
    const receipt = received.body.messages[0].receipt as string;
    const nacked = await call('POST', '/v1/nack', { receipts: [receipt], reason: 'card declined' });
    expect(nacked.body).toEqual({ nacked: 1, results: [true] });
    const dead = await call('GET', '/v1/topics/jobs/dead');
    expect(dead.body.messages).toEqual([
      expect.objectContaining({ id, status: 'dead', lastError: 'card declined' }),
    ]);
    expect((await call('GET', `/v1/messages/${id}`)).body.lastError).toBe('card declined');
    const wrong = await call('POST', '/v1/nack', { receipts: [receipt], reason: 7 });
    expect(wrong.status).toBe(400);
  });
});
