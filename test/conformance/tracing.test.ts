/**
 * Tracing, one specification run on every backend (backends.ts), with an OpenTelemetry SDK
 * registered (../tracing/otel.ts): the trace context of a schedule comes back with each delivery
 * of the message, and the `process` and `dead` spans of its deliveries join the trace of its
 * `create` span, whichever way the delivery ended (docs/observability.md, "Spans").
 */

import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterEach, describe, expect, it } from 'vitest';
import type { ReceivedMessage } from '../../src/queue/types.js';
import { waitFor } from '../support/wait-for.js';
import { CALLER, traceparentOf, useTracing } from '../tracing/otel.js';
import { backends, closeAll, useBackends } from './backends.js';

useBackends();
const tracing = useTracing();

const GIVEN = { traceparent: CALLER.traceparent, tracestate: CALLER.tracestate };

/** The one ended span named `name` about the message `id`. */
function spanOf(name: string, id: string): ReadableSpan {
  const found = tracing
    .spans()
    .filter((span) => span.name === name && span.attributes['messaging.message.id'] === id);
  expect(found, `${name} spans of ${id}`).toHaveLength(1);
  return found[0];
}

/** `span` is a child of the `create` span of its message, with a link to it. */
function continues(span: ReadableSpan, create: ReadableSpan): void {
  expect(span.spanContext().traceId).toBe(CALLER.traceId);
  expect(span.parentSpanContext?.spanId).toBe(create.spanContext().spanId);
  expect(span.links.map((link) => link.context.spanId)).toEqual([create.spanContext().spanId]);
}

describe.each(backends)('tracing on $name', (backend) => {
  afterEach(closeAll);

  it('gives each delivery the context of its create span; a nacked last attempt makes a dead span', async () => {
    const queue = await backend.open();
    await queue.schedule({ topic: 't', id: 'one', payload: 1, maxAttempts: 1, trace: GIVEN });
    await queue.scheduleMany([
      { topic: 't', id: 'two', payload: 2, trace: GIVEN },
      { topic: 't', id: 'three', payload: 3, trace: GIVEN },
    ]);
    const got: ReceivedMessage[] = [];
    while (got.length < 3) got.push(...(await queue.receive('t', { max: 3, waitMs: 5_000 })));
    for (const message of got) {
      const create = spanOf('create t', message.id);
      expect(create.spanContext().traceId).toBe(CALLER.traceId);
      expect(create.parentSpanContext?.spanId).toBe(CALLER.spanId);
      expect(message.trace).toEqual({
        traceparent: traceparentOf(create.spanContext()),
        tracestate: CALLER.tracestate,
      });
    }
    const one = got.find((message) => message.id === 'one')!;
    expect(await queue.nack(one.receipt, { delayMs: 10, reason: 'declined' })).toBe(true);
    await waitFor(() => tracing.spans().some((span) => span.name === 'dead t'));
    const dead = spanOf('dead t', 'one');
    continues(dead, spanOf('create t', 'one'));
    expect(dead.attributes).toMatchObject({
      'messaging.operation.type': 'settle',
      'tickwheel.message.attempts': 1,
      'tickwheel.message.last_error': 'declined',
    });
  });

  it('runs consume() deliveries in process spans of the trace; a thrown last attempt makes a dead span', async () => {
    const queue = await backend.open();
    await queue.schedule({ topic: 'c', id: 'fine', payload: 'ok', trace: GIVEN });
    await queue.schedule({ topic: 'c', id: 'bad', payload: 'x', maxAttempts: 1, trace: GIVEN });
    const consumer = queue.consume(
      'c',
      (message) => {
        if (message.payload === 'x') throw new Error('handler broke');
      },
      { onError: () => {} },
    );
    const names = () => tracing.spans().map((span) => span.name);
    await waitFor(
      () =>
        names().filter((name) => name === 'process c').length === 2 && names().includes('dead c'),
      { timeoutMs: 10_000 },
    );
    await consumer.close();
    for (const id of ['fine', 'bad']) continues(spanOf('process c', id), spanOf('create c', id));
    expect(spanOf('process c', 'fine').events.map((event) => event.name)).toEqual(['ack']);
    expect(spanOf('process c', 'bad').events.map((event) => event.name)).toContain('nack');
    continues(spanOf('dead c', 'bad'), spanOf('create c', 'bad'));
  });
});
