/**
 * An OpenTelemetry SDK for tests: a tracer provider that keeps finished spans in memory and the
 * async-hooks context manager, registered globally for a test file and removed after it.
 */

import { context, propagation, trace, type SpanContext } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base';
import { afterAll, afterEach, beforeAll, expect } from 'vitest';

export interface Tracing {
  /** The spans ended so far (since the last test). */
  spans(): ReadableSpan[];
  /** The one ended span with this name. */
  span(name: string): ReadableSpan;
}

export function useTracing(): Tracing {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  beforeAll(() => {
    trace.setGlobalTracerProvider(provider);
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  });
  afterEach(() => exporter.reset());
  afterAll(async () => {
    await provider.shutdown();
    trace.disable();
    context.disable();
    propagation.disable();
  });
  return {
    spans: () => exporter.getFinishedSpans(),
    span(name) {
      const found = exporter.getFinishedSpans().filter((span) => span.name === name);
      if (found.length !== 1) {
        const names = exporter.getFinishedSpans().map((span) => span.name);
        throw new Error(`${found.length} spans named ${name}; ended: ${names.join(', ')}`);
      }
      return found[0];
    },
  };
}

/** The traceparent of a span context. */
export function traceparentOf(span: SpanContext): string {
  return `00-${span.traceId}-${span.spanId}-0${span.traceFlags}`;
}

/** A caller's trace: the context an upstream service would send in its traceparent header. */
export const CALLER = {
  traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
  spanId: '00f067aa0ba902b7',
  traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
  tracestate: 'congo=t61rcWkgMzE',
};

/**
 * POST /v1/topics/:topic/messages to the server at `url` with the caller's trace headers, as
 * another service would; the message's id.
 */
export async function scheduleOverHttp(
  url: string,
  topic: string,
  body: object,
): Promise<{ id: string }> {
  const response = await fetch(`${url}/v1/topics/${topic}/messages`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      traceparent: CALLER.traceparent,
      tracestate: CALLER.tracestate,
    },
    body: JSON.stringify(body),
  });
  expect(response.status).toBe(201);
  return (await response.json()) as { id: string };
}
