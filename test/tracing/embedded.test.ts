/**
 * Tracing on the embedded queue: the trace context of the call that schedules a message is
 * stored with it (file store and memory store), survives a reopen of the file store, and the
 * consumer's `process` span joins the producer's trace.
 */

import { SpanKind, SpanStatusCode, context, trace } from '@opentelemetry/api';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock/index.js';
import { DelayQueue, MemoryStore, type ReceivedMessage } from '../../src/delay-queue.js';
import { useTempDirs } from '../support/temp-dir.js';
import { waitFor } from '../support/wait-for.js';
import { CALLER, traceparentOf, useTracing } from './otel.js';

const tempDir = useTempDirs('tracing');
const tracing = useTracing();
const T0 = Date.UTC(2026, 0, 1);

const opened: DelayQueue[] = [];
afterEach(async () => {
  for (const queue of opened.splice(0)) await queue.close();
});

async function open(options: Parameters<typeof DelayQueue.open>[0]): Promise<DelayQueue> {
  const queue = await DelayQueue.open(options);
  opened.push(queue);
  return queue;
}

/** Runs `work` inside a span of the caller's own, as application code would. */
function inCallerSpan<T>(work: () => Promise<T>): Promise<T> {
  return trace.getTracer('app').startActiveSpan('handle request', async (span) => {
    try {
      return await work();
    } finally {
      span.end();
    }
  });
}

describe('tracing on the embedded queue', () => {
  it('makes a create span in the caller trace and a process span that continues it', async () => {
    const queue = await open({ dir: tempDir() });
    const { id } = await inCallerSpan(() => queue.schedule({ topic: 'emails', payload: { n: 1 } }));
    const handled: ReceivedMessage[] = [];
    let activeInHandler: string | undefined;
    const consumer = queue.consume('emails', (message) => {
      handled.push(message);
      activeInHandler = trace.getSpan(context.active())?.spanContext().spanId;
    });
    await waitFor(() => tracing.spans().some((span) => span.name === 'process emails'));
    await consumer.close();

    const caller = tracing.span('handle request');
    const create = tracing.span('create emails');
    const process = tracing.span('process emails');
    expect(create.kind).toBe(SpanKind.PRODUCER);
    expect(create.spanContext().traceId).toBe(caller.spanContext().traceId);
    expect(create.parentSpanContext?.spanId).toBe(caller.spanContext().spanId);
    expect(create.attributes).toEqual({
      'messaging.system': 'tickwheel',
      'messaging.operation.type': 'create',
      'messaging.operation.name': 'create',
      'messaging.destination.name': 'emails',
      'messaging.message.id': id,
    });
    expect(handled[0].trace).toEqual({ traceparent: traceparentOf(create.spanContext()) });

    expect(process.kind).toBe(SpanKind.CONSUMER);
    expect(process.spanContext().traceId).toBe(caller.spanContext().traceId);
    expect(process.parentSpanContext?.spanId).toBe(create.spanContext().spanId);
    expect(process.links.map((link) => link.context.spanId)).toEqual([create.spanContext().spanId]);
    expect(process.attributes).toMatchObject({
      'messaging.system': 'tickwheel',
      'messaging.operation.type': 'process',
      'messaging.destination.name': 'emails',
      'messaging.message.id': id,
    });
    expect(process.events.map((event) => event.name)).toEqual(['ack']);
    expect(activeInHandler).toBe(process.spanContext().spanId);
  });

  it('marks a failed delivery with a nack event and an error status, and its burial with a dead span', async () => {
    const queue = await open({ store: new MemoryStore() });
    await queue.schedule({ topic: 'jobs', payload: 1, maxAttempts: 1 });
    const consumer = queue.consume(
      'jobs',
      () => {
        throw new Error('no printer');
      },
      { onError: () => {} },
    );
    await waitFor(() => tracing.spans().some((span) => span.name === 'dead jobs'));
    await consumer.close();
    const process = tracing.span('process jobs');
    const dead = tracing.span('dead jobs');
    expect(dead.kind).toBe(SpanKind.CLIENT);
    expect(dead.parentSpanContext?.spanId).toBe(tracing.span('create jobs').spanContext().spanId);
    expect(dead.attributes).toMatchObject({
      'messaging.operation.type': 'settle',
      'messaging.operation.name': 'dead',
      'tickwheel.message.last_error': 'Error: no printer',
    });
    expect(process.events.map((event) => event.name)).toEqual(['nack', 'exception']);
    expect(process.status).toEqual({ code: SpanStatusCode.ERROR, message: 'no printer' });
    expect(process.parentSpanContext?.spanId).toBe(
      tracing.span('create jobs').spanContext().spanId,
    );
  });

  it('stores a trace context given with the request, and makes its create span under it', async () => {
    const queue = await open({ store: new MemoryStore() });
    await queue.scheduleMany([
      {
        topic: 'a',
        payload: 1,
        trace: { traceparent: CALLER.traceparent, tracestate: CALLER.tracestate },
      },
      { topic: 'a', payload: 2, trace: { traceparent: 'not a traceparent' } },
    ]);
    const [first, second] = await queue.receive('a', { max: 2 });
    const creates = tracing.spans().filter((span) => span.name === 'create a');
    expect(creates.map((span) => span.attributes['messaging.batch.message_count'])).toEqual([2, 2]);
    expect(creates[0].spanContext().traceId).toBe(CALLER.traceId);
    expect(creates[0].parentSpanContext).toMatchObject({ spanId: CALLER.spanId, isRemote: true });
    expect(first.trace).toEqual({
      traceparent: traceparentOf(creates[0].spanContext()),
      tracestate: CALLER.tracestate,
    });
    // The malformed one is ignored: the message is scheduled, its span starts a trace of its own.
    expect(creates[1].spanContext().traceId).not.toBe(CALLER.traceId);
    expect(second.payload).toBe(2);
  });

  it('keeps the context of a message durably: it survives a reopen of the file store', async () => {
    const dir = tempDir();
    const clock = new ManualClock(T0);
    const first = await open({ dir, clock, horizonMs: 1000 });
    await inCallerSpan(async () => {
      await first.schedule({ topic: 'later', payload: 'near', id: 'near' });
      // Beyond the horizon: on disk only, read back from its record when its window loads.
      await first.schedule({ topic: 'later', payload: 'far', id: 'far', delayMs: 60_000 });
    });
    await first.close();
    opened.length = 0;
    const stored = new Map(
      tracing
        .spans()
        .filter((span) => span.name === 'create later')
        .map((span) => [
          span.attributes['messaging.message.id'],
          traceparentOf(span.spanContext()),
        ]),
    );

    const reopened = await open({ dir, clock, horizonMs: 1000 });
    const [near] = await reopened.receive('later');
    expect(near.trace).toEqual({ traceparent: stored.get('near') });
    await reopened.ack(near.receipt);
    // The clock moves a second at a time, as the queue's window loads follow it.
    const [far] = await waitFor(async () => {
      clock.advance(1000);
      const got = await reopened.receive('later');
      return got.length > 0 ? got : undefined;
    });
    expect(far.id).toBe('far');
    expect(far.trace).toEqual({ traceparent: stored.get('far') });
  });
});
