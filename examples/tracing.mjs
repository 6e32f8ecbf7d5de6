// Follow a message with OpenTelemetry from the request that scheduled it to the handler that
// ran it (docs/observability.md): a `tickwheel serve`-style server, the client SDK scheduling
// inside the application's span, a consumer, and the trace printed as a tree at the end.
// Needs @opentelemetry/api, @opentelemetry/sdk-trace-base and @opentelemetry/context-async-hooks.
// Run: npm run build && node examples/tracing.mjs

import { SpanKind, context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { TickwheelClient } from 'tickwheel/client';
import { DelayQueue, MemoryStore } from 'tickwheel/queue';
import { createServer } from 'tickwheel/server';

// The SDK, as an application sets it up (an OTLP exporter in production; memory here).
const exporter = new InMemorySpanExporter();
trace.setGlobalTracerProvider(
  new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }),
);
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
const app = trace.getTracer('shop');

const queue = await DelayQueue.open({ store: new MemoryStore() });
const server = await createServer({ queue, logLevel: 'silent' });
await server.listen({ port: 0, host: '127.0.0.1' });
const client = new TickwheelClient({ url: `http://127.0.0.1:${server.server.address().port}` });

// The request that schedules: the client sends its span's context as `traceparent`.
await app.startActiveSpan('POST /checkout', async (span) => {
  await client.schedule({ topic: 'emails', payload: { to: 'ada@example.com' }, delayMs: 200 });
  span.end();
});

// The handler, 200 ms later: it runs in a `process emails` span of the same trace.
let delivered;
const done = new Promise((resolve) => (delivered = resolve));
const consumer = client.consume('emails', (message) => {
  app.startActiveSpan('send email', (span) => {
    span.setAttribute('email.to', message.payload.to);
    span.end();
  });
  delivered(message);
});
const message = await done;
await consumer.close();
await client.close();
await server.close();
await queue.close();

console.log(`the message carried traceparent ${message.trace.traceparent}`);
const spans = exporter.getFinishedSpans();
const children = (parent) =>
  spans.filter((span) => span.parentSpanContext?.spanId === parent?.spanContext().spanId);
const print = (span, depth) => {
  const events = span.events.map((event) => event.name);
  const kind = span.kind === SpanKind.INTERNAL ? '' : ` ${SpanKind[span.kind]}`;
  console.log(`${'  '.repeat(depth)}${span.name}${kind}${events.length ? ` [${events}]` : ''}`);
  for (const child of children(span)) print(child, depth + 1);
};
const roots = spans.filter((span) => span.parentSpanContext === undefined);
console.log(`trace ${roots[0].spanContext().traceId}: ${spans.length} spans`);
for (const root of roots) print(root, 0);
