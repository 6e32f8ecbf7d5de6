/**
 * docs/http-api.md's examples of a delivery and of an ack are what a server answers: the same
 * fields in the same order, and a receipt of the form the server hands out.
 */

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { openServer } from './harness.js';

const doc = readFileSync(new URL('../../docs/http-api.md', import.meta.url), 'utf8');

/** The JSON answer shown right after the first example curl to `route`. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON of any shape
function answerAfter(route: string): any {
  const at = doc.indexOf(`curl -s -X POST $TW${route}`);
  expect(at, `an example of ${route}`).toBeGreaterThan(0);
  const block = /```json\n([\s\S]*?)```/.exec(doc.slice(at));
  return JSON.parse(block![1]);
}

/** The receipts an example curl to `route` sends. */
function receiptsSentTo(route: string): string[] {
  const line = doc.split('\n').find((text) => text.startsWith(`curl -s -X POST $TW${route} `))!;
  return JSON.parse(/-d '(.*)'$/.exec(line)![1]).receipts;
}

/** The embedded queue's receipt: a random prefix, the slot and a counter in base 36. */
const EMBEDDED_RECEIPT = /^r[\w-]{12}[0-9a-z]+\.[0-9a-z]+$/;

describe('docs/http-api.md examples', () => {
  it('a received message has the fields, and the receipt form, the server gives', async () => {
    const { call } = await openServer();
    const sent = await call('POST', '/v1/topics/emails/messages', {
      id: 'welcome-42',
      payload: { to: 'a@b.c' },
    });
    expect(sent.status).toBe(201);
    const received = await call('POST', '/v1/topics/emails/receive', { max: 10, waitMs: 5000 });
    const [real] = received.body.messages;
    const [documented] = answerAfter('/v1/topics/emails/receive').messages;

    expect(Object.keys(documented)).toEqual(Object.keys(real));
    expect(real.receipt).toMatch(EMBEDDED_RECEIPT);
    expect(documented.receipt).toMatch(EMBEDDED_RECEIPT);
    expect({ ...documented, deliverAt: 0, receipt: '' }).toEqual({
      ...real,
      deliverAt: 0,
      receipt: '',
    });

    for (const receipt of [...receiptsSentTo('/v1/ack'), ...receiptsSentTo('/v1/nack')]) {
      expect(receipt).toMatch(EMBEDDED_RECEIPT);
    }
    const acked = await call('POST', '/v1/ack', { receipts: [real.receipt, `${real.receipt}0`] });
    expect(Object.keys(answerAfter('/v1/ack'))).toEqual(Object.keys(acked.body));
    expect(acked.body).toEqual({ acked: 1, results: [true, false] });
    expect(answerAfter('/v1/ack')).toEqual(acked.body);
  });
});
