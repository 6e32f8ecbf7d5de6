/**
 * Tracing on Valkey/Redis: a schedule over HTTP to a server on a Valkey node keeps the
 * request's trace context in the message's record, and consume() runs the message in a process
 * span that joins the caller's trace.
 */

import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DelayQueue } from '../../src/delay-queue.js';
import { createServer, type TickwheelServer } from '../../src/server/index.js';
import { waitFor } from '../support/wait-for.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { startServer } from '../../scripts/valkey.mjs';
import { CALLER, scheduleOverHttp, traceparentOf, useTracing } from '../tracing/otel.js';

const tracing = useTracing();

describe('tracing on a Valkey node', () => {
  let valkey: { url: string; stop(): Promise<void> };
  let queue: DelayQueue;
  let server: TickwheelServer;

  beforeAll(async () => {
    valkey = await startServer();
    queue = await DelayQueue.open({
      redis: valkey.url,
      queue: 'traced',
      partitions: 2,
      durability: 'async',
    });
    server = await createServer({ queue, logLevel: 'silent' });
    await server.listen({ port: 0, host: '127.0.0.1' });
  }, 30_000);

  afterAll(async () => {
    await server?.close();
    await queue?.close();
    await valkey?.stop();
  });

  /** Schedules `body` on `topic` over HTTP with the caller's trace headers; its id. */
  async function scheduleTraced(topic: string, body: object): Promise<string> {
    const url = `http://127.0.0.1:${(server.server.address() as AddressInfo).port}`;
    return (await scheduleOverHttp(url, topic, body)).id;
  }

  it('stores the traceparent of an HTTP schedule; consume() continues the trace', async () => {
    const ids: string[] = [];
    // One with an id of its own and one located (the cluster makes its id): both records.
    for (const body of [{ payload: 1, id: 'given-1' }, { payload: 2 }]) {
      ids.push(await scheduleTraced('work', body));
    }
    const traces = new Map<string, unknown>();
    const consumer = queue.consume('work', (message) => {
      traces.set(message.id, message.trace);
    });
    await waitFor(
      () => tracing.spans().filter((span) => span.name === 'process work').length === 2,
      { timeoutMs: 20_000 },
    );
    await consumer.close();

    const creates = tracing.spans().filter((span) => span.name === 'create work');
    const processes = tracing.spans().filter((span) => span.name === 'process work');
    for (const id of ids) {
      const create = creates.find((span) => span.attributes['messaging.message.id'] === id)!;
      const process = processes.find((span) => span.attributes['messaging.message.id'] === id)!;
      expect(create.spanContext().traceId).toBe(CALLER.traceId);
      expect(create.parentSpanContext?.spanId).toBe(CALLER.spanId);
      expect(traces.get(id)).toEqual({
        traceparent: traceparentOf(create.spanContext()),
        tracestate: CALLER.tracestate,
      });
      expect(process.spanContext().traceId).toBe(CALLER.traceId);
      expect(process.parentSpanContext?.spanId).toBe(create.spanContext().spanId);
      expect(process.links[0].context.spanId).toBe(create.spanContext().spanId);
    }
  }, 30_000);

  it('makes a dead span in the trace of a message that dies by a nack, a nack with a delay, or its visibility', async () => {
    // No listener of the queue's events: the span does not depend on them.
    const thrown = await scheduleTraced('fails', { payload: 1, maxAttempts: 1 });
    const declined = await scheduleTraced('declines', { payload: 2, maxAttempts: 1 });
    const stalled = await scheduleTraced('stalls', { payload: 3, maxAttempts: 1 });
    const consumer = queue.consume(
      'fails',
      () => {
        throw new Error('handler broke');
      },
      { onError: () => {} },
    );
    const [delivery] = await queue.receive('declines', { waitMs: 10_000 });
    expect(await queue.nack(delivery.receipt, { delayMs: 10, reason: 'card declined' })).toBe(true);
    await queue.receive('stalls', { waitMs: 10_000, visibilityMs: 50 });
    const deadSpans = () => tracing.spans().filter((span) => span.name.startsWith('dead '));
    await waitFor(() => deadSpans().length === 3, { timeoutMs: 20_000 });
    await consumer.close();

    const cases: Array<[string, string, string]> = [
      ['fails', thrown, 'handler broke'],
      ['declines', declined, 'card declined'],
      ['stalls', stalled, 'visibility timeout'],
    ];
    for (const [topic, id, lastError] of cases) {
      const create = tracing.span(`create ${topic}`);
      const dead = tracing.span(`dead ${topic}`);
      expect(create.attributes['messaging.message.id']).toBe(id);
      expect(dead.spanContext().traceId).toBe(CALLER.traceId);
      expect(dead.parentSpanContext?.spanId).toBe(create.spanContext().spanId);
      expect(dead.links[0].context.spanId).toBe(create.spanContext().spanId);
      expect(dead.attributes).toMatchObject({
        'messaging.operation.name': 'dead',
        'messaging.destination.name': topic,
        'messaging.message.id': id,
        'tickwheel.message.attempts': 1,
        'tickwheel.message.last_error': expect.stringContaining(lastError),
      });
    }
  }, 30_000);
});
