/**
 * The options of `tickwheel serve`: where the queue lives (--dir, --redis or --postgres) and the
 * node's settings with a shared store, the HTTP server's bounds, and its logs. Each has an
 * environment variable; `tickwheel serve --help` prints them from here.
 */

import { defaultMaxConnections, defaultPushConnections } from '../server/connections.js';
import { DEFAULT_BODY_LIMIT, LOG_LEVELS } from '../server/settings.js';
import type { FlagsOf, OptionSpec } from './args.js';
import { durationOption, integerParser, parsePushAllow } from './parse.js';
import { MAX_WAIT_MS } from '../protocol/limits.js';
import { DEFAULT_MAX_SCHEDULES } from '../queue/options.js';

const LOG_FORMATS = ['auto', 'json', 'pretty'] as const;

export const SERVE_OPTIONS = [
  {
    name: 'dir',
    value: '<path>',
    description: 'data directory (created if missing); not used with --redis or --postgres',
    env: 'TICKWHEEL_DIR',
    default: './data',
    conflicts: ['redis', 'postgres'],
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
    conflicts: ['redis', 'postgres'],
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
    name: 'postgres',
    value: '<url>',
    description:
      'run as a node of a queue on PostgreSQL instead of on --dir: a postgres:// connection string (libpq parameters such as sslmode in its query); needs the pg package',
    env: 'TICKWHEEL_POSTGRES',
    conflicts: 'redis',
  },
  {
    name: 'queue',
    requires: ['redis', 'postgres'],
    value: '<name>',
    description:
      "with --redis or --postgres: the queue's name (several queues can share one Valkey or one database)",
    env: 'TICKWHEEL_QUEUE',
    default: 'default',
  },
  {
    name: 'partitions',
    requires: ['redis', 'postgres'],
    value: '<n>',
    description:
      'with --redis or --postgres: partitions of a new queue (an existing queue keeps its own)',
    env: 'TICKWHEEL_PARTITIONS',
    default: 64,
    parse: integerParser(1, 16_384),
  },
  {
    name: 'durability',
    requires: 'redis',
    // On PostgreSQL, its synchronous_commit decides.
    conflicts: 'postgres',
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
      'with --redis or --postgres: how long to keep trying to reach Valkey/Redis or PostgreSQL at start (down, restarting, loading its data) before giving up with ERR_TICKWHEEL_UNAVAILABLE',
      [1, 600_000],
    ),
    requires: ['redis', 'postgres'],
    env: 'TICKWHEEL_CONNECT_TIMEOUT',
    default: 10_000,
    defaultText: '10s',
  },
  {
    name: 'node-id',
    requires: ['redis', 'postgres'],
    value: '<id>',
    description: "with --redis or --postgres: this node's name among the nodes (default: random)",
    env: 'TICKWHEEL_NODE_ID',
  },
  {
    name: 'pool-size',
    requires: 'postgres',
    value: '<n>',
    description: "with --postgres: connections of this node's pool",
    env: 'TICKWHEEL_POOL_SIZE',
    default: 10,
    parse: integerParser(1, 1_000),
  },
  {
    name: 'body-limit',
    value: '<bytes>',
    description: 'largest request body; larger ones get 413',
    env: 'TICKWHEEL_BODY_LIMIT',
    default: DEFAULT_BODY_LIMIT,
    defaultText: `${DEFAULT_BODY_LIMIT} (1 MiB + 64 KiB: a payload of 1 MiB and its fields)`,
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
    conflicts: ['redis', 'postgres'],
  },
  {
    name: 'max-schedules',
    value: '<n>',
    description:
      'recurring schedules the queue keeps at most; creating one more is refused with 409 ERR_TICKWHEEL_CONFLICT until one is deleted',
    env: 'TICKWHEEL_MAX_SCHEDULES',
    default: DEFAULT_MAX_SCHEDULES,
    parse: integerParser(0, 10_000_000),
  },
  {
    ...durationOption('max-wait', 'longest long poll of a receive', [0, MAX_WAIT_MS]),
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
      'topics with a topic label of their own in /metrics (of those with the most messages, the first seen); the rest are summed under topic="_other"',
    env: 'TICKWHEEL_METRICS_TOPICS',
    default: 100,
    parse: integerParser(1, 1_000),
  },
  {
    ...durationOption(
      'connection-timeout',
      'time a connection has to send a whole request, headers and body, from when it opens or the request starts; then 408 and closed',
      [100, 3_600_000],
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
    name: 'push-connections',
    value: '<n>',
    description:
      'most connections to push targets open at once, over all topics; a push past them waits for one within its timeout',
    env: 'TICKWHEEL_PUSH_CONNECTIONS',
    defaultText: `${defaultPushConnections()} here: half of the files --max-connections leaves aside, 8 to 256`,
    parse: integerParser(1, 1_000_000),
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
