/**
 * Preloaded with `node --import ./bench/tracing/register.mjs` to run a benchmark with tracing
 * on: an OpenTelemetry tracer provider that samples every span, batches them, and drops them at
 * export (the cost measured is tickwheel's spans, not an exporter's I/O), and the async-hooks
 * context manager. Forked cells inherit the flag, so every cell traces.
 */

import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';

let exported = 0;
const dropping = {
  export(spans, done) {
    exported += spans.length;
    done({ code: 0 });
  },
  shutdown: async () => {},
};

trace.setGlobalTracerProvider(
  new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(dropping)] }),
);
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
process.on('exit', () => {
  if (process.env.TICKWHEEL_TRACE_COUNT) console.error(`spans exported: ${exported}`);
});
