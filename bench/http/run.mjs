/**
 * HTTP benchmark of `tickwheel serve`: the server in its own process (dist/cli/main.js, fsync
 * 'batch' by default: every 201 is fsynced), the load generator here, on the client SDK
 * (dist/client), which keeps connections alive.
 *
 *   schedule-single-c1   one request at a time: the latency of a schedule on an idle server
 *   schedule-single      many concurrent single schedules on the client SDK (fetch)
 *   schedule-single-http the same on a bare node:http keep-alive client (as autocannon would):
 *                        what the server can take when the client is not the bottleneck
 *   schedule-batch       POST /v1/messages:batch: throughput (target: >= 50,000 messages/s)
 *   receive-ack          messages already due, taken by concurrent receive + ack loops
 *
 * Results go to bench/results/http.json. Run with npm run bench:http (builds first).
 */

import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, platform, release, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { URL, fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Latencies, timedLoad } from './load.mjs';
import { rawClient } from './raw-client.mjs';
import { startServer } from './server.mjs';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const TARGET_BATCH_MESSAGES_PER_SECOND = 50_000;

const { values: args } = parseArgs({
  options: {
    duration: { type: 'string', default: '8' },
    'single-concurrency': { type: 'string', default: '64' },
    'batch-size': { type: 'string', default: '500' },
    'batch-concurrency': { type: 'string', default: '4' },
    'ack-messages': { type: 'string', default: '100000' },
    consumers: { type: 'string', default: '8' },
    'receive-max': { type: 'string', default: '250' },
    fsync: { type: 'string', default: 'batch' },
    out: { type: 'string', default: join(ROOT, 'bench', 'results', 'http.json') },
    quick: { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
});

if (args.help) {
  process.stdout.write(`npm run bench:http -- [options]
  --duration <s>             seconds per throughput phase (default 8)
  --single-concurrency <n>   concurrent single schedules (default 64)
  --batch-size <n>           messages per batch request (default 500)
  --batch-concurrency <n>    concurrent batch requests (default 4)
  --ack-messages <n>         messages for the receive/ack phase (default 100000)
  --consumers <n>            concurrent receive + ack loops (default 8)
  --receive-max <n>          messages per receive (default 250)
  --fsync <policy>           batch | always | never (default batch)
  --out <file>               results file (default bench/results/http.json)
  --quick                    tiny run, to check that the benchmark works
`);
  process.exit(0);
}

const number = (name) => {
  const value = Number(args[name]);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`--${name} must be a positive number`);
  return value;
};

const options = args.quick
  ? {
      durationMs: 600,
      singleConcurrency: 8,
      batchSize: 100,
      batchConcurrency: 2,
      ackMessages: 2000,
      consumers: 2,
      receiveMax: 100,
      fsync: args.fsync,
    }
  : {
      durationMs: number('duration') * 1000,
      singleConcurrency: number('single-concurrency'),
      batchSize: number('batch-size'),
      batchConcurrency: number('batch-concurrency'),
      ackMessages: number('ack-messages'),
      consumers: number('consumers'),
      receiveMax: number('receive-max'),
      fsync: args.fsync,
    };

async function loadClient() {
  try {
    return await import('../../dist/client/index.js');
  } catch (err) {
    throw new Error(`cannot load dist/client/index.js; run npm run build first (${err.message})`);
  }
}

const HOUR = 3_600_000;
const text = 'x'.repeat(64);
const payload = (n) => ({ n, text });

function round(value, digits = 0) {
  const scale = 10 ** digits;
  return Math.round(value * scale) / scale;
}

/** Runs a phase, with the server's and this process's CPU use over it. */
async function phase(server, name, run) {
  const serverCpu0 = server.cpuSeconds();
  const clientCpu0 = process.cpuUsage();
  const result = await run();
  const serverCpu1 = server.cpuSeconds();
  const clientCpu = process.cpuUsage(clientCpu0);
  const cpu = {
    serverCores:
      serverCpu0 === null || serverCpu1 === null
        ? null
        : round((serverCpu1 - serverCpu0) / result.seconds, 2),
    clientCores: round((clientCpu.user + clientCpu.system) / 1e6 / result.seconds, 2),
  };
  const summary = {
    ...result,
    seconds: round(result.seconds, 2),
    messagesPerSecond: round(result.messages / result.seconds),
    cpu,
    // Messages per second of server CPU: what one free core would carry. Less sensitive than
    // messagesPerSecond to other work on the machine.
    messagesPerServerCpuSecond:
      cpu.serverCores === null || cpu.serverCores === 0
        ? null
        : round(result.messages / result.seconds / cpu.serverCores),
  };
  const latency = summary.latencyMs;
  process.stdout.write(
    `${name.padEnd(22)} ${String(summary.messagesPerSecond).padStart(8)} msg/s` +
      (latency ? `   request p50 ${latency.p50} ms, p99 ${latency.p99} ms` : '') +
      `   server ${cpu.serverCores ?? '?'} cores, client ${cpu.clientCores} cores\n`,
  );
  return summary;
}

async function receiveAck(client, server) {
  const topic = 'bench.ack';
  const total = options.ackMessages;
  const batch = Math.min(1000, total);
  for (let sent = 0; sent < total; sent += batch) {
    const size = Math.min(batch, total - sent);
    await client.scheduleMany(
      Array.from({ length: size }, (_, i) => ({ topic, payload: payload(sent + i) })),
    );
  }
  return phase(server, 'receive-ack', async () => {
    const latencies = new Latencies();
    let acked = 0;
    const started = performance.now();
    const consumer = async () => {
      while (acked < total) {
        const t0 = performance.now();
        const messages = await client.receive(topic, { max: options.receiveMax, waitMs: 200 });
        if (messages.length === 0) continue;
        const results = await client.ackMany(messages.map((message) => message.receipt));
        acked += results.filter(Boolean).length;
        latencies.add(performance.now() - t0);
      }
    };
    await Promise.all(Array.from({ length: options.consumers }, consumer));
    return {
      messages: acked,
      seconds: (performance.now() - started) / 1000,
      latencyMs: latencies.summary(),
    };
  });
}

async function main() {
  const { TickwheelClient } = await loadClient();
  const dir = mkdtempSync(join(tmpdir(), 'tickwheel-bench-http-'));
  const server = await startServer({ dir, fsync: options.fsync });
  const client = new TickwheelClient({ url: server.url, retries: 0, timeoutMs: 60_000 });
  const environment = {
    node: process.version,
    platform: `${platform()} ${release()}`,
    cpu: cpus()[0]?.model ?? 'unknown',
    cores: cpus().length,
    loadAverageAtStart: loadavg().map((load) => round(load, 2)),
  };
  process.stdout.write(
    `tickwheel HTTP benchmark: ${environment.cores} cores, node ${environment.node}, ` +
      `fsync ${options.fsync}, load average ${environment.loadAverageAtStart.join(' ')}\n`,
  );
  let sequence = 0;
  const single = () =>
    client
      .schedule({ topic: 'bench.single', payload: payload(sequence++), delayMs: HOUR })
      .then(() => 1);
  const batch = () =>
    client
      .scheduleMany(
        Array.from({ length: options.batchSize }, () => ({
          topic: 'bench.batch',
          payload: payload(sequence++),
          delayMs: HOUR,
        })),
      )
      .then((results) => results.length);
  const raw = rawClient(server.url, options.singleConcurrency);
  const rawSingle = () =>
    raw
      .post('/v1/topics/bench.single/messages', { payload: payload(sequence++), delayMs: HOUR })
      .then(() => 1);
  const results = {};
  try {
    // Warm-up: let both processes compile their hot paths.
    await timedLoad({
      durationMs: Math.min(1500, options.durationMs),
      concurrency: 16,
      op: single,
    });
    await timedLoad({
      durationMs: Math.min(1500, options.durationMs),
      concurrency: 16,
      op: rawSingle,
    });
    await timedLoad({ durationMs: Math.min(1500, options.durationMs), concurrency: 2, op: batch });

    results['schedule-single-c1'] = await phase(server, 'schedule-single-c1', () =>
      timedLoad({ durationMs: Math.min(3000, options.durationMs), concurrency: 1, op: single }),
    );
    results['schedule-single'] = await phase(server, 'schedule-single', () =>
      timedLoad({
        durationMs: options.durationMs,
        concurrency: options.singleConcurrency,
        op: single,
      }),
    );
    results['schedule-single-http'] = await phase(server, 'schedule-single-http', () =>
      timedLoad({
        durationMs: options.durationMs,
        concurrency: options.singleConcurrency,
        op: rawSingle,
      }),
    );
    results['schedule-batch'] = await phase(server, 'schedule-batch', () =>
      timedLoad({
        durationMs: options.durationMs,
        concurrency: options.batchConcurrency,
        op: batch,
      }),
    );
    results['receive-ack'] = await receiveAck(client, server);
    results['schedule-single'].concurrency = options.singleConcurrency;
    results['schedule-single-http'].concurrency = options.singleConcurrency;
    results['schedule-batch'].concurrency = options.batchConcurrency;
    results['schedule-batch'].batchSize = options.batchSize;
    results['receive-ack'].consumers = options.consumers;
    results['receive-ack'].receiveMax = options.receiveMax;
    const stats = await client.stats();
    results.serverStore = stats.store;
  } finally {
    raw.close();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }

  const measured = results['schedule-batch'].messagesPerSecond;
  const report = {
    schema: 'tickwheel-bench-http/1',
    date: new Date().toISOString(),
    environment,
    options,
    results,
    targets: [
      {
        id: 'schedule-batch-throughput',
        description: `>= ${TARGET_BATCH_MESSAGES_PER_SECOND} messages/s scheduled via POST /v1/messages:batch`,
        target: TARGET_BATCH_MESSAGES_PER_SECOND,
        measured,
        met: measured >= TARGET_BATCH_MESSAGES_PER_SECOND,
      },
    ],
    notes: [
      'Server and load generator share the machine; cpu.serverCores / cpu.clientCores show how much of it each used.',
      'latencyMs is per request (a batch request carries batchSize messages).',
      'A load average well above 0 at start means other work shared the cores: numbers are then pessimistic; messagesPerServerCpuSecond is steadier.',
    ],
  };
  mkdirSync(dirname(args.out), { recursive: true });
  writeFileSync(args.out, `${JSON.stringify(report, null, 2)}\n`);
  const target = report.targets[0];
  process.stdout.write(
    `single-message p99: ${results['schedule-single-c1'].latencyMs.p99} ms one at a time, ` +
      `${results['schedule-single'].latencyMs.p99} ms (SDK) / ` +
      `${results['schedule-single-http'].latencyMs.p99} ms (bare http) with ` +
      `${options.singleConcurrency} in flight\n` +
      `target ${target.description}: ${target.met ? 'met' : 'NOT met'} (${measured})\n` +
      `wrote ${args.out}\n`,
  );
}

main().catch((err) => {
  process.stderr.write(`${err.stack ?? err}\n`);
  process.exitCode = 1;
});
