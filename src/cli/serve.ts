/**
 * `tickwheel serve`: listens, opens the queue (503 meanwhile), shuts down on SIGTERM / SIGINT.
 * All it says is log lines on stdout; only a failure to start goes to stderr. The last start-up
 * line, `tickwheel listening on URL`, comes once the queue is open.
 */

import { isIP, type AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import type { RecoveryReport } from '../delay-queue.js';
import type { ServerOptions, TickwheelServer } from '../server/index.js';
import { defaultPushConnections } from '../server/connections.js';
import { checkConnectionString } from '../postgres/reach.js';
import { hidePassword, invalidOption } from '../validate.js';
import { checkRedisUrls } from '../valkey/urls.js';
import { UsageError } from './args.js';
import type { CliIo } from './io.js';
import { prettyLine } from './pretty-log.js';
import type { ServeOptions } from './serve-options.js';

/** Longest wait for the log's last lines to reach stdout before the process ends anyway. */
const LOG_FLUSH_MS = 5_000;

/**
 * Ends the process once what it wrote to stdout is out of its hands: a pipe to a reader that
 * lags (a log shipper) holds writes in memory, and an immediate exit would drop the last lines
 * ("stopped" among them).
 */
function exitOnceWritten(code: number): void {
  const exit = () => process.exit(code);
  setTimeout(exit, LOG_FLUSH_MS);
  process.stdout.write('', exit);
}

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/** Fastify logs one "Server listening at" line per address at info; ours comes later. */
async function listenQuietly(
  server: TickwheelServer,
  options: { port: number; host: string },
): Promise<void> {
  const level = server.log.level;
  if (['info', 'debug', 'trace'].includes(level)) server.log.level = 'warn';
  try {
    await server.listen(options);
  } catch (err) {
    const why = LISTEN_FAILURES[(err as { code?: string }).code ?? ''];
    if (why === undefined) throw err;
    const { host, port } = options;
    const shown = host.includes(':') ? `[${host}]` : host;
    throw invalidOption(`cannot listen on ${shown}:${port}: ${why}`);
  } finally {
    server.log.level = level;
  }
}

/** Why listening failed, for the system errors --host or --port cure. */
const LISTEN_FAILURES: Readonly<Record<string, string>> = {
  EADDRINUSE:
    'another program uses that port (EADDRINUSE): choose another (--port, TICKWHEEL_PORT)',
  EACCES:
    'this user may not listen on that port (EACCES): choose one from 1024 up (--port, TICKWHEEL_PORT)',
  ENOTFOUND:
    'no such host name (ENOTFOUND): give an address or name of this machine (--host, TICKWHEEL_HOST)',
  EAI_AGAIN:
    'the host name could not be looked up (EAI_AGAIN): give an address of this machine (--host, TICKWHEEL_HOST)',
  EADDRNOTAVAIL:
    'that address is not one of this machine (EADDRNOTAVAIL): give one of its own (--host, TICKWHEEL_HOST)',
};

function recoveryText(recovery: RecoveryReport | undefined): string {
  if (recovery === undefined) return 'opened the queue';
  const base = `recovered ${recovery.live} live messages in ${Math.round(recovery.durationMs)} ms`;
  if (recovery.snapshot === 'used') {
    const replayed = (recovery.replayedBytes / 1048576).toFixed(1);
    return `${base} (from a snapshot and ${replayed} MiB of log)`;
  }
  if (recovery.snapshot === 'none') return base;
  return `${base} (snapshot ${recovery.snapshot}; replayed the whole log)`;
}

export async function serve(options: ServeOptions, io: CliIo): Promise<void> {
  // Loaded here, so that client commands do not pay for Fastify.
  const { closeOnSignals, createServer } = await import('../server/index.js');
  const token = options.token === '' ? undefined : options.token;
  const host = options.host ?? (token === undefined ? '127.0.0.1' : '0.0.0.0');
  const pretty =
    options.logFormat === 'pretty' ||
    (options.logFormat === 'auto' && io.outIsTerminal?.() === true);
  const redis = options.redis === undefined || options.redis === '' ? undefined : options.redis;
  const postgres =
    options.postgres === undefined || options.postgres === '' ? undefined : options.postgres;
  if (redis !== undefined && postgres !== undefined) {
    // Reached when one of them comes from the environment (TICKWHEEL_REDIS, TICKWHEEL_POSTGRES).
    throw new UsageError(
      'give --redis or --postgres, not both: a queue lives in one store',
      'tickwheel serve',
    );
  }
  const where = storeOptions(options, redis, postgres);
  const server = await createServer({
    ...where,
    bodyLimit: options.bodyLimit,
    maxWaitMs: options.maxWait,
    requestTimeoutMs: Math.round(options.connectionTimeout),
    ...(options.maxConnections === undefined ? {} : { maxConnections: options.maxConnections }),
    metricsTopics: options.metricsTopics,
    logLevel: options.logLevel,
    logStream: { write: (line: string) => io.out(pretty ? prettyLine(line) : line) },
    openInBackground: true,
    allowedHosts: [
      ...(options.allowedHosts ?? []),
      ...(isIP(host) === 0 && host !== 'localhost' ? [host] : []),
    ],
    ...(token === undefined ? {} : { token }),
  });
  const log = server.log;
  const closeAndThrow = async (err: unknown): Promise<never> => {
    await server.close();
    throw err;
  };
  await listenQuietly(server, { port: options.port, host }).catch(closeAndThrow);
  closeOnSignals(server, {
    say: (line, level) => log[level](line.replace(/^tickwheel: /, '')),
    exit: exitOnceWritten,
  });
  const address = server.server.address() as AddressInfo;
  const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${shown}:${address.port}`;
  const dir = resolve(options.dir);
  if (redis !== undefined) {
    const fields = { redis: hidePassword(redis), queue: options.queue, url };
    log.info(
      fields,
      `queue ${options.queue} on ${fields.redis} (durability ${options.durability}); ` +
        `joining: until it has, ${url} answers 503`,
    );
  } else if (postgres !== undefined) {
    const fields = { postgres: hidePassword(postgres), queue: options.queue, url };
    log.info(
      fields,
      `queue ${options.queue} on PostgreSQL ${fields.postgres}; ` +
        `joining: until it has, ${url} answers 503`,
    );
  } else {
    log.info(
      { dir, fsync: options.fsync, url },
      `data in ${dir}; recovering: until the queue is open, ${url} answers 503`,
    );
  }

  await server.opened.catch(closeAndThrow);
  const recovery = server.queue.recovery;
  const shared = redis !== undefined || postgres !== undefined;
  const { cluster } = shared ? await server.queue.stats() : {};
  if (cluster !== undefined) {
    const { node, members, partitions, durability, durabilityReason } = cluster;
    log.info(
      { node, members, durability, durabilityReason },
      `joined as node ${node}: ${members.length} node(s) share ${partitions} partitions; ` +
        `durability ${durability} (${durabilityReason})`,
    );
  } else {
    log.info(recovery === undefined ? {} : { recovery }, recoveryText(recovery));
  }
  if (recovery !== undefined && recovery.corrupt.length > 0) {
    log.warn(
      { code: 'ERR_TICKWHEEL_CORRUPT', skipped: recovery.corrupt.length },
      `skipped ${recovery.corrupt.length} damaged records while recovering`,
    );
  }
  const repaired = recovery?.repair;
  if (repaired?.applied === true) {
    log.warn(
      { code: 'ERR_TICKWHEEL_CORRUPT', lost: repaired.lost, repairedAt: repaired.at },
      `${dir} was repaired at ${repaired.at}: dropped ` +
        `${repaired.lost} messages that could not be read (${repaired.damage.length} damaged ` +
        `${repaired.damage.length === 1 ? 'stretch' : 'stretches'} of the log); see ` +
        `${resolve(dir, 'repair.json')}`,
    );
  }
  if (token === undefined) {
    if (isLoopback(host)) {
      log.info(
        `no token: listening on ${host} only. To accept other machines, set --token ` +
          '(or TICKWHEEL_TOKEN) and --host 0.0.0.0',
      );
    } else {
      log.warn(
        { url },
        `no token and listening on ${host}: anyone who can reach this port can ` +
          'schedule, read and cancel messages. Set --token (or TICKWHEEL_TOKEN)',
      );
    }
  } else {
    log.info('token required: /v1 requests need "Authorization: Bearer <token>"');
  }
  const wildcard = host === '0.0.0.0' || host === '::';
  const dashboard = `http://${wildcard ? 'localhost' : shown}:${address.port}/`;
  if (pretty) {
    log.info(
      'stop: Ctrl-C or SIGTERM (requests in flight finish and the data is flushed; twice to exit at once)',
    );
  }
  // Last, so that whoever waits for this line has seen the others.
  log.info({ url, dashboard }, `tickwheel listening on ${url}`);
}

/** Where the server opens its queue, and that queue's options, from the command line. */
function storeOptions(
  options: ServeOptions,
  redis: string | undefined,
  postgres: string | undefined,
): Pick<ServerOptions, 'dir' | 'fsync' | 'queueOptions' | 'redis' | 'postgres' | 'cluster'> {
  const push = {
    allow: options.pushAllow ?? [],
    maxConnections: options.pushConnections ?? defaultPushConnections(),
  };
  const durableAcks = options.durableAcks === true;
  const maxSchedules = options.maxSchedules;
  const node = {
    queue: options.queue,
    partitions: options.partitions,
    durableAcks,
    maxSchedules,
    push,
    connectTimeoutMs: options.connectTimeout,
    ...(options.nodeId === undefined ? {} : { nodeId: options.nodeId }),
  };
  // URLs are checked here, before the server listens and says it is joining.
  if (redis !== undefined) {
    // Commas separate URLs, and the Sentinels inside one redis+sentinel:// URL.
    const urls = redis.split(/,(?=\s*[a-z+]+:\/\/)/).map((url) => url.trim());
    checkRedisUrls(urls);
    return { redis: urls, cluster: { ...node, durability: options.durability } };
  }
  if (postgres !== undefined) {
    checkConnectionString(postgres);
    return { postgres, cluster: { ...node, poolSize: options.poolSize } };
  }
  return {
    dir: options.dir,
    fsync: options.fsync,
    queueOptions: {
      push,
      durableAcks,
      maxSchedules,
      payloadMemoryBytes: options.payloadMemory * 1024 * 1024,
    },
  };
}
