/**
 * Tracing across HTTP: a schedule's `traceparent` header is stored with the message by the
 * server, the client SDK sends its active context and gets the stored one back on received
 * messages, and an HTTP push carries `traceparent` to pushListener, whose span continues it.
 */

import { createServer as createHttpServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { SpanKind, trace } from '@opentelemetry/api';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TickwheelClient, pushListener, type PushedMessage } from '../../src/client/index.js';
import { DelayQueue, MemoryStore } from '../../src/delay-queue.js';
import { createServer, type TickwheelServer } from '../../src/server/index.js';
import { waitFor } from '../support/wait-for.js';
import { CALLER, scheduleOverHttp, traceparentOf, useTracing } from './otel.js';

const tracing = useTracing();
const SECRET = 'tracing-test-secret-0123456789';

let queue: DelayQueue;
let server: TickwheelServer;
let url: string;
const cleanups: Array<() => Promise<unknown>> = [];

beforeEach(async () => {
  queue = await DelayQueue.open({ store: new MemoryStore(), push: { allow: ['127.0.0.1'] } });
  server = await createServer({ queue, logLevel: 'silent', maxWaitMs: 2000 });
  await server.listen({ port: 0, host: '127.0.0.1' });
  url = `http://127.0.0.1:${(server.server.address() as AddressInfo).port}`;
});

afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
  await server.close();
  await queue.close();
});

function client(): TickwheelClient {
  const made = new TickwheelClient({ url });
  cleanups.push(() => made.close());
  return made;
}

describe('tracing over HTTP', () => {
  it("stores the request's traceparent; the client's receive and consume continue it", async () => {
    const { id } = await scheduleOverHttp(url, 'emails', { payload: { to: 'a@example.com' } });
    const create = tracing.span('create emails');
    expect(create.spanContext().traceId).toBe(CALLER.traceId);
    expect(create.parentSpanContext).toMatchObject({ spanId: CALLER.spanId, isRemote: true });

    const sdk = client();
    const handled: string[] = [];
    const consumer = sdk.consume('emails', (message) => {
      handled.push(message.trace?.traceparent ?? 'none');
    });
    await waitFor(() => tracing.spans().some((span) => span.name === 'process emails'));
    await consumer.close();
    const stored = traceparentOf(create.spanContext());
    expect(handled).toEqual([stored]);
    const process = tracing.span('process emails');
    expect(process.kind).toBe(SpanKind.CONSUMER);
    expect(process.spanContext().traceId).toBe(CALLER.traceId);
    expect(process.parentSpanContext?.spanId).toBe(create.spanContext().spanId);
    expect(process.links[0].context.spanId).toBe(create.spanContext().spanId);
    expect(process.attributes['messaging.message.id']).toBe(id);
    expect(process.events.map((event) => event.name)).toEqual(['ack']);
  });

  it("stores the request's traceparent; the server's embedded consume() continues it", async () => {
    await scheduleOverHttp(url, 'local', { payload: 1 });
    const consumer = queue.consume('local', () => {});
    await waitFor(() => tracing.spans().some((span) => span.name === 'process local'));
    await consumer.close();
    const create = tracing.span('create local');
    const process = tracing.span('process local');
    expect(process.spanContext().traceId).toBe(CALLER.traceId);
    expect(process.parentSpanContext?.spanId).toBe(create.spanContext().spanId);
    expect(create.parentSpanContext?.spanId).toBe(CALLER.spanId);
  });

  it('returns the stored context on received messages, with its tracestate', async () => {
    await scheduleOverHttp(url, 'jobs', { payload: 1 });
    const [message] = await client().receive('jobs');
    expect(message.trace).toEqual({
      traceparent: traceparentOf(tracing.span('create jobs').spanContext()),
      tracestate: CALLER.tracestate,
    });
  });

  it('ignores a malformed traceparent header: the message is scheduled all the same', async () => {
    const response = await fetch(`${url}/v1/messages:batch`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent: '00-zz-yy-01' },
      body: JSON.stringify({ messages: [{ topic: 'x', payload: 1 }] }),
    });
    expect(response.status).toBe(201);
    expect(tracing.span('create x').spanContext().traceId).not.toBe(CALLER.traceId);
  });

  it("sends the client's active context with a schedule and a batch", async () => {
    const sdk = client();
    const app = trace.getTracer('app');
    const spans = await app.startActiveSpan('checkout', async (span) => {
      await sdk.schedule({ topic: 'one', payload: 1 });
      await sdk.scheduleMany([
        { topic: 'many', payload: 1 },
        { topic: 'many', payload: 2 },
      ]);
      span.end();
      return span.spanContext();
    });
    const creates = tracing.spans().filter((span) => span.name.startsWith('create '));
    expect(creates).toHaveLength(3);
    for (const create of creates) {
      expect(create.spanContext().traceId).toBe(spans.traceId);
      expect(create.parentSpanContext?.spanId).toBe(spans.spanId);
    }
  });

  it('sends traceparent with an HTTP push, and pushListener continues it', async () => {
    const got: PushedMessage[] = [];
    let active: string | undefined;
    const receiver: Server = createHttpServer(
      pushListener({ secret: SECRET }, (message) => {
        got.push(message);
        active = trace.getActiveSpan()?.spanContext().spanId;
      }),
    );
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    cleanups.push(
      () =>
        new Promise<void>((resolve) => {
          receiver.closeAllConnections();
          receiver.close(() => resolve());
        }),
    );
    const target = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/`;
    await queue.configureTopic('hooks', { push: { url: target, secret: SECRET } });
    await scheduleOverHttp(url, 'hooks', { payload: { event: 'paid' } });
    await waitFor(
      () => tracing.spans().filter((span) => span.name === 'process hooks').length === 2,
    );

    const create = tracing.span('create hooks');
    const processes = tracing.spans().filter((span) => span.name === 'process hooks');
    const isPush = (span: (typeof processes)[number]) =>
      span.parentSpanContext?.spanId === create.spanContext().spanId;
    const pushed = processes.find(isPush)!;
    const received = processes.find((span) => !isPush(span))!;
    // The queue's push worker processes the message as a child of its create span, and the
    // receiver's span is a child of the push (the traceparent it was sent).
    expect(pushed.parentSpanContext?.spanId).toBe(create.spanContext().spanId);
    expect(received.parentSpanContext).toMatchObject({
      spanId: pushed.spanContext().spanId,
      isRemote: true,
    });
    expect(received.spanContext().traceId).toBe(CALLER.traceId);
    expect(received.kind).toBe(SpanKind.CONSUMER);
    expect(got[0].trace?.traceparent).toBe(traceparentOf(pushed.spanContext()));
    expect(active).toBe(received.spanContext().spanId);
  });
});
