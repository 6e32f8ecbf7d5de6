/**
 * POST /v1/ack and /v1/nack answer once the acks are applied, before their group commit's
 * fsync; `"durable": true` answers once it is done (docs/http-api.md, "Ack").
 */

import { describe, expect, it } from 'vitest';
import { FileStore } from '../../src/store/file/file-store.js';
import { openServer } from './harness.js';
import { heldDisk } from '../support/held-disk.js';
import { useTempDirs } from '../support/temp-dir.js';
import { waitFor } from '../support/wait-for.js';

const tempDir = useTempDirs('ack-durable');

async function serverWithReceived(count: number) {
  const held = heldDisk();
  const store = await FileStore.open({ dir: tempDir(), fsync: 'batch', logIo: held.io });
  const { call } = await openServer({}, { store });
  for (let i = 0; i < count; i++) await call('POST', '/v1/topics/jobs/messages', { payload: i });
  const receipts: string[] = [];
  await waitFor(async () => {
    const res = await call('POST', '/v1/topics/jobs/receive', { max: 10, waitMs: 200 });
    receipts.push(...res.body.messages.map((m: { receipt: string }) => m.receipt));
    return receipts.length === count;
  });
  return { call, held, receipts };
}

/** Whether `promise` settles within a few turns of the event loop. */
async function settlesSoon(promise: Promise<unknown>): Promise<boolean> {
  let settled = false;
  promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
  return settled;
}

describe('POST /v1/ack and /v1/nack with the fsync held', () => {
  it('answer at once without durable, and only after the fsync with "durable": true', async () => {
    const { call, held, receipts } = await serverWithReceived(4);
    held.hold();
    const durable = call('POST', '/v1/ack', { receipts: [receipts[0]], durable: true });
    const durableNack = call('POST', '/v1/nack', { receipts: [receipts[1]], durable: true });
    await waitFor(() => held.disk.waiting > 0);
    const ack = call('POST', '/v1/ack', { receipts: [receipts[2]] });
    const nack = call('POST', '/v1/nack', { receipts: [receipts[3]], durable: false });
    expect(await settlesSoon(ack)).toBe(true);
    expect(await settlesSoon(nack)).toBe(true);
    expect((await ack).body).toEqual({ acked: 1, results: [true] });
    expect((await nack).body).toEqual({ nacked: 1, results: [true] });
    expect(await settlesSoon(durable)).toBe(false);
    expect(await settlesSoon(durableNack)).toBe(false);
    held.release();
    expect((await durable).body).toEqual({ acked: 1, results: [true] });
    expect((await durableNack).body).toEqual({ nacked: 1, results: [true] });
  });

  it('refuses a durable that is not a boolean', async () => {
    const { call, receipts } = await serverWithReceived(1);
    const res = await call('POST', '/v1/ack', { receipts, durable: 'yes' });
    expect(res.status).toBe(400);
  });
});
