/**
 * OpenTelemetry spans after the messaging conventions (docs/observability.md): `create <topic>`
 * per message scheduled (its context stored with the message), `process <topic>` per delivery
 * a Worker runs (a child of that context), `dead <topic>` for a dead letter. The optional peer
 * `@opentelemetry/api` is loaded on first use; without it or a provider no span is made.
 */

import { createRequire } from 'node:module';
import type * as Otel from '@opentelemetry/api';
import type { TraceContext } from '../protocol/trace-context.js';
import { traceContextOf } from '../protocol/trace-context.js';

type Api = typeof Otel;

/** The optional peer dependency and the range package.json's peerDependencies give. */
export const TRACING_PEER = { name: '@opentelemetry/api', range: '^1.3.0' } as const;

const TRACER_NAME = 'tickwheel';
const SYSTEM = 'tickwheel';

/** undefined: not tried yet; null: not installed. */
let loaded: Api | null | undefined;

function api(): Api | null {
  if (loaded === undefined) {
    try {
      loaded = createRequire(import.meta.url)(TRACING_PEER.name) as Api;
    } catch {
      loaded = null;
    }
  }
  return loaded;
}

/** The tracer, when a tracer provider is registered; undefined otherwise (no spans then). */
function tracer(otel: Api): Otel.Tracer | undefined {
  const provider = otel.trace.getTracerProvider() as Partial<Otel.ProxyTracerProvider>;
  // The global provider is a proxy until one is registered: then it has a delegate.
  if (typeof provider.getDelegateTracer === 'function') {
    return provider.getDelegateTracer(TRACER_NAME);
  }
  return otel.trace.getTracer(TRACER_NAME);
}

function spanContextOf(otel: Api, trace: TraceContext): Otel.SpanContext {
  const [, traceId, spanId, flags] = trace.traceparent.split('-');
  return {
    traceId,
    spanId,
    traceFlags: Number.parseInt(flags, 16) & 1,
    isRemote: true,
    traceState:
      trace.tracestate === undefined ? undefined : otel.createTraceState(trace.tracestate),
  };
}

/** A span context as the context to store, or undefined when it is not valid. */
function traceOf(otel: Api, span: Otel.SpanContext | undefined): TraceContext | undefined {
  if (span === undefined || !otel.isSpanContextValid(span)) return undefined;
  const flags = (span.traceFlags & 0xff).toString(16).padStart(2, '0');
  return traceContextOf(`00-${span.traceId}-${span.spanId}-${flags}`, span.traceState?.serialize());
}

/** The active context's span as a context to store (the client's headers), or undefined. */
export function activeTrace(): TraceContext | undefined {
  const otel = api();
  if (otel === null) return undefined;
  return traceOf(otel, otel.trace.getSpanContext(otel.context.active()));
}

/** A span's messaging attributes (and the delivery's id and attempts, when given). */
function messaging(
  type: string,
  name: string,
  topic: string,
  message?: Delivered,
): Otel.Attributes {
  const attributes: Otel.Attributes = {
    'messaging.system': SYSTEM,
    'messaging.operation.type': type,
    'messaging.operation.name': name,
    'messaging.destination.name': topic,
  };
  if (message === undefined) return attributes;
  attributes['messaging.message.id'] = message.id;
  if (message.attempts !== undefined) attributes['tickwheel.message.attempts'] = message.attempts;
  return attributes;
}

/** What producerSpan changes: a checked request's topic and the context stored with it. */
interface Produced {
  topic: string;
  id: string;
  trace: TraceContext | undefined;
}

/**
 * Starts the `create` span of a message about to be scheduled (undefined: no provider), and
 * sets `message.trace` to the context to store: the span's, or the given or active one.
 */
export function producerSpan(message: Produced, batch: number): Otel.Span | undefined {
  const otel = api();
  if (otel === null) return undefined;
  const given = message.trace;
  const parent =
    given === undefined
      ? otel.context.active()
      : otel.trace.setSpanContext(otel.ROOT_CONTEXT, spanContextOf(otel, given));
  const tracing = tracer(otel);
  if (tracing === undefined) {
    if (given === undefined) message.trace = traceOf(otel, otel.trace.getSpanContext(parent));
    return undefined;
  }
  const attributes = messaging('create', 'create', message.topic);
  if (message.id !== '') attributes['messaging.message.id'] = message.id;
  if (batch > 1) attributes['messaging.batch.message_count'] = batch;
  const span = tracing.startSpan(
    `create ${message.topic}`,
    { kind: otel.SpanKind.PRODUCER, attributes },
    parent,
  );
  message.trace = traceOf(otel, span.spanContext()) ?? given;
  return span;
}

/** Ends the `create` spans of messages when their schedule settles; resolves as `done` does. */
export function endProducers<T extends { id: string }>(
  spans: readonly (Otel.Span | undefined)[],
  done: Promise<T[]>,
): Promise<T[]> {
  return done.then(
    (scheduled) => {
      for (let i = 0; i < spans.length; i++) {
        spans[i]?.setAttribute('messaging.message.id', scheduled[i].id);
        spans[i]?.end();
      }
      return scheduled;
    },
    (err: unknown) => {
      for (const span of spans) {
        if (span === undefined) continue;
        failed(span, err);
        span.end();
      }
      throw err;
    },
  );
}

function failed(span: Otel.Span, err: unknown): void {
  if (err instanceof Error) span.recordException(err);
  span.setStatus({
    code: (api() as Api).SpanStatusCode.ERROR,
    message: String((err as Error)?.message ?? err),
  });
}

export interface Processing {
  span: Otel.Span;
  context: Otel.Context;
}

interface Delivered {
  id: string;
  attempts?: number;
  trace?: TraceContext | undefined;
}

/** Starts the `process` span of a delivery, a child of its stored context, linked to it. */
export function startProcess(topic: string, message: Delivered): Processing | undefined {
  const otel = api();
  if (otel === null) return undefined;
  const tracing = tracer(otel);
  if (tracing === undefined) return undefined;
  const stored = message.trace === undefined ? undefined : spanContextOf(otel, message.trace);
  const parent =
    stored === undefined ? otel.ROOT_CONTEXT : otel.trace.setSpanContext(otel.ROOT_CONTEXT, stored);
  const attributes = messaging('process', 'process', topic, message);
  const span = tracing.startSpan(
    `process ${topic}`,
    {
      kind: otel.SpanKind.CONSUMER,
      attributes,
      links: stored === undefined ? undefined : [{ context: stored }],
    },
    parent,
  );
  return { span, context: otel.trace.setSpan(parent, span) };
}

export function runProcessing<M, R>(
  processing: Processing,
  handler: (message: M) => R,
  message: M,
): R {
  return (api() as Api).context.with(processing.context, handler, undefined, message);
}

/** Ends a delivery's span with an `ack` event, or a `nack` event and the failure. */
export function endProcess(processing: Processing, failure: unknown, failedRun: boolean): void {
  const { span } = processing;
  if (failedRun) {
    span.addEvent('nack');
    failed(span, failure);
  } else span.addEvent('ack');
  span.end();
}

/** A `dead <topic>` settle span: the message ran out of attempts (`reason`: its lastError). */
export function deadSpan(topic: string, message: Delivered, reason: string | undefined): void {
  const otel = api();
  if (otel === null || message.trace === undefined) return;
  const tracing = tracer(otel);
  if (tracing === undefined) return;
  const stored = spanContextOf(otel, message.trace);
  const attributes = messaging('settle', 'dead', topic, message);
  if (reason !== undefined) attributes['tickwheel.message.last_error'] = reason;
  tracing
    .startSpan(
      `dead ${topic}`,
      { kind: otel.SpanKind.CLIENT, attributes, links: [{ context: stored }] },
      otel.trace.setSpanContext(otel.ROOT_CONTEXT, stored),
    )
    .end();
}

/** Trace headers for an outgoing request: the active span's context, else `fallback`. */
export function traceHeaders(
  headers: Record<string, string>,
  fallback: TraceContext | undefined,
): void {
  const trace = activeTrace() ?? fallback;
  if (trace === undefined) return;
  headers.traceparent = trace.traceparent;
  if (trace.tracestate !== undefined) headers.tracestate = trace.tracestate;
}
