/**
 * `tickwheel serve`: listens, opens the queue (503 meanwhile), shuts down on SIGTERM / SIGINT.
 * All it says is log lines on stdout; only a failure to start goes to stderr. The last start-up
 * line, `tickwheel listening on URL`, comes once the queue is open.
 */

import { isIP, type AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import type { RecoveryReport } from '../delay-queue.js';
import { defaultMaxConnections } from '../server/connections.js';
import { LOG_LEVELS } from '../server/settings.js';
import type { TickwheelServer } from '../server/server.js';
import type { FlagsOf, OptionSpec } from './args.js';
import type { CliIo } from './io.js';
import { durationOption, integerParser, parsePushAllow } from './parse.js';
import { prettyLine } from './pretty-log.js';

const LOG_FORMATS = ['auto', 'json', 'pretty'] as const;

export const SERVE_OPTIONS = [
  {
    name: 'dir',
    value: '<path>',
    description: 'data directory (created if missing); not used with --redis',
    env: 'TICKWHEEL_DIR',
    default: './data',
    conflicts: 'redis',
  },
  {
    name: 'port',
    value: '<port>',
    description: 'TCP port; 0 picks a free one',
    env: 'TICKWHEEL_PORT',
    default: 7700,
    parse: integerParser(0, 65535),
  },
  {
    name: 'host',
    value: '<address>',
    description: 'address to bind (default: 127.0.0.1, or 0.0.0.0 when a token is set)',
    env: 'TICKWHEEL_HOST',
  },
  {
    name: 'token',
    value: '<token>',
    description: 'require "Authorization: Bearer <token>" on /v1 routes',
    env: 'TICKWHEEL_TOKEN',
  },
  {
    name: 'allowed-hosts',
    value: '<names>',
    description:
      'comma-separated host names the server answers to besides localhost, IP addresses and the --host name; other Host headers get 421 (DNS rebinding), token or not',
    env: 'TICKWHEEL_ALLOWED_HOSTS',
    parse: (text: string) =>
      text
        .split(',')
        .map((name) => name.trim())
        .filter((name) => name !== ''),
  },
  {
    name: 'fsync',
    value: '<policy>',
    description:
      'when a 201 is sent: after fsync (batch: group commit; always: one fsync per change) or after the write (never)',
    env: 'TICKWHEEL_FSYNC',
    choices: ['batch', 'always', 'never'],
    default: 'batch',
  },
  {
    name: 'durable-acks',
    description:
      'answer POST /v1/ack and /v1/nack once the acks are durable (as a 201 is sent), not once applied; a request can ask with "durable": true',
  },
  {
    name: 'redis',
    value: '<urls>',
    description:
      'run as a node of a queue on Valkey/Redis instead of on --dir: redis:// URL(s), comma-separated (a standalone primary, or any nodes of a Cluster), or redis+sentinel://host:port,host:port/name',
    env: 'TICKWHEEL_REDIS',
  },
  {
    name: 'queue',
    requires: 'redis',
    value: '<name>',
    description: "with --redis: the queue's name (several queues can share one Valkey)",
    env: 'TICKWHEEL_QUEUE',
    default: 'default',
  },
  {
    name: 'partitions',
    requires: 'redis',
    value: '<n>',
    description: 'with --redis: partitions of a new queue (an existing queue keeps its own)',
    env: 'TICKWHEEL_PARTITIONS',
    default: 64,
    parse: integerParser(1, 16_384),
  },
  {
    name: 'durability',
    requires: 'redis',
    value: '<setting>',
    description:
      'with --redis: when a 201 is sent: once a replica has it (replicated: WAIT), once the primary and a replica fsynced it (fsynced: WAITAOF), or once the primary has it (async); auto: replicated if the primaries have replicas, else async, decided at start (replicated and fsynced are refused at start where no primary has a replica)',
    env: 'TICKWHEEL_DURABILITY',
    choices: ['auto', 'replicated', 'fsynced', 'async'],
    default: 'auto',
  },
  {
    ...durationOption(
      'connect-timeout',
      'with --redis: how long to keep trying to reach Valkey/Redis at start (down, restarting, loading its data) before giving up with ERR_TICKWHEEL_UNAVAILABLE',
    ),
    requires: 'redis',
    env: 'TICKWHEEL_CONNECT_TIMEOUT',
    default: 10_000,
    defaultText: '10s',
  },
  {
    name: 'node-id',
    requires: 'redis',
    value: '<id>',
    description: "with --redis: this node's name among the nodes (default: random)",
    env: 'TICKWHEEL_NODE_ID',
  },
  {
    name: 'body-limit',
    value: '<bytes>',
    description: 'largest request body; larger ones get 413',
    env: 'TICKWHEEL_BODY_LIMIT',
    default: 1024 * 1024,
    defaultText: '1048576 (1 MiB)',
    parse: integerParser(1024, 1024 ** 3),
  },
  {
    name: 'payload-memory',
    value: '<MiB>',
    description:
      'payload bytes the embedded queue holds in memory, in MiB; beyond it payloads are read back from the log when received',
    env: 'TICKWHEEL_PAYLOAD_MEMORY',
    default: 128,
    parse: integerParser(0, 1_048_576),
  },
  {
    ...durationOption('max-wait', 'longest long poll of a receive'),
    env: 'TICKWHEEL_MAX_WAIT',
    default: 20_000,
    defaultText: '20s',
  },
  {
    name: 'max-connections',
    value: '<n>',
    description:
      'most connections open at once; at the cap, the one that has waited longest without sending a whole request is closed to make room',
    env: 'TICKWHEEL_MAX_CONNECTIONS',
    defaultText: `${defaultMaxConnections()} here: the file limit (ulimit -n) less a quarter of it (at least 128) kept for the data files, 16 to 4096`,
    parse: integerParser(1, 1_000_000),
  },
  {
    name: 'metrics-topics',
    value: '<n>',
    description:
      'topics with a topic label of their own in /metrics (the first seen); the rest are summed under topic="_other"',
    env: 'TICKWHEEL_METRICS_TOPICS',
    default: 100,
    parse: integerParser(1, 10_000),
  },
  {
    ...durationOption(
      'connection-timeout',
      'time a connection has to send a whole request, headers and body, from when it opens or the request starts; then 408 and closed',
    ),
    env: 'TICKWHEEL_CONNECTION_TIMEOUT',
    default: 30_000,
    defaultText: '30s',
  },
  {
    name: 'push-allow',
    value: '<cidr|host>',
    description:
      'internal addresses push targets may reach (loopback, private, link-local and unique-local ones are refused otherwise): CIDR blocks, addresses or host names, comma-separated or repeated',
    env: 'TICKWHEEL_PUSH_ALLOW',
    parse: parsePushAllow,
    list: true,
  },
  {
    name: 'log-level',
    value: '<level>',
    description:
      'lowest level logged on stdout: start-up lines and requests are info, faults warn or error (docs/operations.md, Logs)',
    env: 'TICKWHEEL_LOG_LEVEL',
    default: 'info',
    choices: LOG_LEVELS,
  },
  {
    name: 'log-format',
    value: '<format>',
    description:
      'json: one JSON object a line, for log pipelines; pretty: short lines for people; auto: pretty on a terminal, json otherwise',
    env: 'TICKWHEEL_LOG_FORMAT',
    default: 'auto',
    choices: LOG_FORMATS,
  },
] as const satisfies readonly OptionSpec[];

export type ServeOptions = FlagsOf<typeof SERVE_OPTIONS>;

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

  await server.opened.catch(closeAndThrow);
  const recovery = server.queue.recovery;
  const { cluster } = redis === undefined ? {} : await server.queue.stats();
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

/** URLs as they may be printed: `redis://user:secret@host` shows `redis://user:***@host`. */
function hidePasswords(urls: string): string {
  return urls.replace(/(\/\/[^:@/]*:)[^@/]*@/g, '$1***@');
}
