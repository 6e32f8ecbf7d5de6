/**
 * `tickwheel serve`: locks the data directory, listens, recovers the queue (answering 503
 * meanwhile), and shuts down gracefully on SIGTERM / SIGINT. Without a token it binds to
 * loopback only unless told otherwise, and says so.
 *
 * What it prints depends on whether a log level was set (--log-level or TICKWHEEL_LOG_LEVEL):
 *
 *   - none: lines for people on stdout (where the data is, the dashboard, how to stop it),
 *     warnings and the server's own warn-level logs on stderr;
 *   - set: JSON lines only on stdout (pino's), the start-up lines among them at info whatever
 *     the level (short of silent), so a warn-level server still says where it listens.
 *
 * Either way the last start-up line is `tickwheel listening on http://HOST:PORT`, printed
 * once the queue is open and requests are served; the port is open (answering 503) from the
 * `recovering` line on.
 */

import { isIP, type AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import type { FsyncPolicy, RecoveryReport } from '../delay-queue.js';
import type { LogLevel } from '../server/settings.js';
import type { TickwheelServer } from '../server/server.js';
import type { CliIo } from './io.js';

export interface ServeOptions {
  dir: string;
  port: number;
  host?: string;
  token?: string;
  /** Host names served besides localhost, IP addresses and `host`. */
  allowedHosts?: string[];
  fsync: FsyncPolicy;
  /** Comma-separated Valkey/Redis URLs: a node of a queue there instead of on `dir`. */
  redis?: string;
  queue: string;
  partitions: number;
  durability: 'auto' | 'replicated' | 'fsynced' | 'async';
  /** With `redis`: how long to keep trying to reach it at start (ms). */
  connectTimeout: number;
  nodeId?: string;
  bodyLimit: number;
  maxWait: number;
  /** Unset: the server's default, from the file limit. */
  maxConnections?: number;
  connectionTimeout: number;
  metricsTopics: number;
  /** MiB of payloads the embedded queue holds in memory. */
  payloadMemory: number;
  /** Internal addresses push targets may reach (the queue's push.allow). */
  pushAllow?: string[];
  /** Unset: human-readable start-up text. */
  logLevel?: LogLevel;
}

/** Where start-up lines go: people's text, or log records. */
interface Reporter {
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  /** Shutdown progress (closeOnSignals). */
  progress(line: string): void;
}

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

function isWildcard(host: string): boolean {
  return host === '0.0.0.0' || host === '::';
}

function humanReporter(io: CliIo): Reporter {
  return {
    info: (message) => io.out(`${message}\n`),
    warn: (message) => io.err(`warning: ${message}\n`),
    progress: (line) => io.err(`${line}\n`),
  };
}

function logReporter(server: TickwheelServer, level: LogLevel): Reporter {
  if (level === 'silent') return { info: () => {}, warn: () => {}, progress: () => {} };
  // A child at info, so start-up lines show whatever the server's level.
  const log = server.log.child({}, { level: 'info' });
  return {
    info: (message, fields = {}) => log.info(fields, message),
    warn: (message, fields = {}) => log.warn(fields, message),
    progress: (line) => log.info(line.replace(/^tickwheel: /, '')),
  };
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
  } finally {
    server.log.level = level;
  }
}

function recoveryText(recovery: RecoveryReport | undefined): string {
  if (recovery === undefined) return 'opened the queue';
  const base = `recovered ${recovery.live} live messages in ${Math.round(recovery.durationMs)} ms`;
  if (recovery.snapshot === 'used') {
    return `${base} (from a snapshot and ${formatMiB(recovery.replayedBytes)} of log)`;
  }
  if (recovery.snapshot === 'none') return base;
  return `${base} (snapshot ${recovery.snapshot}; replayed the whole log)`;
}

export async function serve(options: ServeOptions, io: CliIo): Promise<void> {
  // Loaded here, so that client commands do not pay for Fastify.
  const { closeOnSignals, createServer } = await import('../server/index.js');
  const token = options.token === '' ? undefined : options.token;
  const host = options.host ?? (token === undefined ? '127.0.0.1' : '0.0.0.0');
  const human = options.logLevel === undefined;
  const redis = options.redis === undefined || options.redis === '' ? undefined : options.redis;
  const push = { allow: options.pushAllow ?? [] };
  const where =
    redis === undefined
      ? {
          dir: options.dir,
          fsync: options.fsync,
          queueOptions: { push, payloadMemoryBytes: options.payloadMemory * 1024 * 1024 },
        }
      : {
          // Commas separate URLs, and the Sentinels inside one redis+sentinel:// URL.
          redis: redis.split(/,(?=\s*[a-z+]+:\/\/)/).map((url) => url.trim()),
          cluster: {
            queue: options.queue,
            partitions: options.partitions,
            durability: options.durability,
            push,
            connectTimeoutMs: options.connectTimeout,
            ...(options.nodeId === undefined ? {} : { nodeId: options.nodeId }),
          },
        };
  const server = await createServer({
    ...where,
    bodyLimit: options.bodyLimit,
    maxWaitMs: options.maxWait,
    requestTimeoutMs: Math.round(options.connectionTimeout),
    ...(options.maxConnections === undefined ? {} : { maxConnections: options.maxConnections }),
    metricsTopics: options.metricsTopics,
    logLevel: options.logLevel ?? 'warn',
    logStream: { write: (line: string) => (human ? io.err(line) : io.out(line)) },
    openInBackground: true,
    allowedHosts: [
      ...(options.allowedHosts ?? []),
      ...(isIP(host) === 0 && host !== 'localhost' ? [host] : []),
    ],
    ...(token === undefined ? {} : { token }),
  });
  const report = human ? humanReporter(io) : logReporter(server, options.logLevel as LogLevel);
  try {
    await listenQuietly(server, { port: options.port, host });
  } catch (err) {
    await server.close();
    throw err;
  }
  closeOnSignals(server, { say: report.progress });
  const address = server.server.address() as AddressInfo;
  const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${shown}:${address.port}`;
  const dir = resolve(options.dir);
  if (redis !== undefined) {
    const fields = { redis: hidePasswords(redis), queue: options.queue, url };
    report.info(
      `queue ${options.queue} on ${fields.redis} (durability ${options.durability}); ` +
        `joining: until it has, ${url} answers 503`,
      fields,
    );
  } else if (human) {
    report.info(`data in ${dir} (fsync ${options.fsync})`);
    report.info(`recovering: until the queue is open, ${url} answers 503`);
  } else {
    report.info('recovering the data directory: requests get 503 until the queue is open', {
      dir,
      fsync: options.fsync,
      url,
    });
  }

  try {
    await server.opened;
  } catch (err) {
    await server.close();
    throw err;
  }
  const recovery = server.queue.recovery;
  const { cluster } = redis === undefined ? {} : await server.queue.stats();
  if (cluster !== undefined) {
    report.info(
      `joined as node ${cluster.node}: ${cluster.members.length} node(s) share ` +
        `${cluster.partitions} partitions; durability ${cluster.durability} ` +
        `(${cluster.durabilityReason})`,
      {
        node: cluster.node,
        members: cluster.members,
        durability: cluster.durability,
        durabilityReason: cluster.durabilityReason,
      },
    );
  } else {
    report.info(recoveryText(recovery), recovery === undefined ? {} : { recovery });
  }
  if (recovery !== undefined && recovery.corrupt.length > 0) {
    report.warn(`skipped ${recovery.corrupt.length} damaged records while recovering`);
  }
  const repaired = recovery?.repair;
  if (repaired?.applied === true) {
    io.err(
      `warning: ${resolve(options.dir)} was repaired at ${repaired.at}: dropped ` +
        `${repaired.lost} messages that could not be read (${repaired.damage.length} damaged ` +
        `${repaired.damage.length === 1 ? 'stretch' : 'stretches'} of the log); see ` +
        `${resolve(options.dir, 'repair.json')}\n`,
    );
  }
  if (token === undefined) {
    if (isLoopback(host)) {
      report.info(
        `no token: listening on ${host} only. To accept other machines, set --token ` +
          '(or TICKWHEEL_TOKEN) and --host 0.0.0.0',
      );
    } else {
      report.warn(
        `no token and listening on ${host}: anyone who can reach this port can ` +
          'schedule, read and cancel messages. Set --token (or TICKWHEEL_TOKEN)',
      );
    }
  } else {
    report.info('token required: /v1 requests need "Authorization: Bearer <token>"');
  }
  const dashboard = `http://${isWildcard(host) ? 'localhost' : shown}:${address.port}/`;
  // Last, so that whoever waits for this line has seen the others.
  if (human) {
    report.info(`dashboard: ${dashboard}`);
    report.info(
      'stop: Ctrl-C or SIGTERM (requests in flight finish and the data is flushed; twice to exit at once)',
    );
    report.info(`tickwheel listening on ${url}`);
  } else {
    report.info(`tickwheel listening on ${url}`, { url, dashboard });
  }
}

/** URLs as they may be printed: `redis://user:secret@host` shows `redis://user:***@host`. */
function hidePasswords(urls: string): string {
  return urls.replace(/(\/\/[^:@/]*:)[^@/]*@/g, '$1***@');
}

function formatMiB(bytes: number): string {
  return `${(bytes / 1048576).toFixed(1)} MiB`;
}
