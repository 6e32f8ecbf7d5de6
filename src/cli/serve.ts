/**
 * `tickwheel serve`: locks the data directory, listens, recovers the queue (answering 503
 * meanwhile), and shuts down gracefully on SIGTERM / SIGINT. Without a token it binds to
 * loopback only unless told otherwise, and says so.
 *
 * Everything it says is a log line on stdout through the server's logger: JSON where stdout is
 * not a terminal, a short form for people where it is (pretty-log.ts). Only a failure to start
 * goes to stderr (by main()). The last start-up line is `tickwheel listening on URL`, logged once
 * the queue is open; the port is open (answering 503) from the `recovering` line on.
 */

import { isIP, type AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import type { FsyncPolicy, RecoveryReport } from '../delay-queue.js';
import type { LogLevel } from '../server/settings.js';
import type { TickwheelServer } from '../server/server.js';
import type { CliIo } from './io.js';
import { prettyLine } from './pretty-log.js';

export const LOG_FORMATS = ['auto', 'json', 'pretty'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

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
  durableAcks?: boolean;
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
  logLevel: LogLevel;
  /** auto: pretty where stdout is a terminal, json elsewhere. */
  logFormat: LogFormat;
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
  } finally {
    server.log.level = level;
  }
}

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
  const push = { allow: options.pushAllow ?? [] };
  const durableAcks = options.durableAcks === true;
  const where =
    redis === undefined
      ? {
          dir: options.dir,
          fsync: options.fsync,
          queueOptions: {
            push,
            durableAcks,
            payloadMemoryBytes: options.payloadMemory * 1024 * 1024,
          },
        }
      : {
          // Commas separate URLs, and the Sentinels inside one redis+sentinel:// URL.
          redis: redis.split(/,(?=\s*[a-z+]+:\/\/)/).map((url) => url.trim()),
          cluster: {
            queue: options.queue,
            partitions: options.partitions,
            durability: options.durability,
            durableAcks,
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
  try {
    await listenQuietly(server, { port: options.port, host });
  } catch (err) {
    await server.close();
    throw err;
  }
  closeOnSignals(server, {
    say: (line, level) => log[level](line.replace(/^tickwheel: /, '')),
  });
  const address = server.server.address() as AddressInfo;
  const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${shown}:${address.port}`;
  const dir = resolve(options.dir);
  if (redis !== undefined) {
    const fields = { redis: hidePasswords(redis), queue: options.queue, url };
    log.info(
      fields,
      `queue ${options.queue} on ${fields.redis} (durability ${options.durability}); ` +
        `joining: until it has, ${url} answers 503`,
    );
  } else {
    log.info(
      { dir, fsync: options.fsync, url },
      `data in ${dir}; recovering: until the queue is open, ${url} answers 503`,
    );
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
    log.info(
      {
        node: cluster.node,
        members: cluster.members,
        durability: cluster.durability,
        durabilityReason: cluster.durabilityReason,
      },
      `joined as node ${cluster.node}: ${cluster.members.length} node(s) share ` +
        `${cluster.partitions} partitions; durability ${cluster.durability} ` +
        `(${cluster.durabilityReason})`,
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
      `${resolve(options.dir)} was repaired at ${repaired.at}: dropped ` +
        `${repaired.lost} messages that could not be read (${repaired.damage.length} damaged ` +
        `${repaired.damage.length === 1 ? 'stretch' : 'stretches'} of the log); see ` +
        `${resolve(options.dir, 'repair.json')}`,
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

/** URLs as they may be printed: `redis://user:secret@host` shows `redis://user:***@host`. */
function hidePasswords(urls: string): string {
  return urls.replace(/(\/\/[^:@/]*:)[^@/]*@/g, '$1***@');
}
