/**
 * The `tickwheel` command: serve, repair and bench here, the client commands (send, get, list,
 * topics, schedules, ...) in their modules. Every flag also reads an environment variable (shown
 * in --help); the command line wins over the environment, which wins over the default.
 */

import { defaultMaxConnections } from '../server/connections.js';
import { LOG_LEVELS } from '../server/settings.js';
import { VERSION } from '../server/version.js';
import { runProgram, type CommandSpec, type ProgramSpec } from './args.js';
import { bench } from './bench.js';
import { clientCommands, sendCommand } from './client-commands.js';
import { scheduleCommands } from './schedule-commands.js';
import { topicCommands } from './topic-commands.js';
import { CliError, describeFailure, processIo, type CliIo } from './io.js';
import { integerParser, parseDuration, parsePushAllow } from './parse.js';
import { repair, type RepairOptions } from './repair.js';
import { LOG_FORMATS, serve, type ServeOptions } from './serve.js';

function serveCommand(io: CliIo): CommandSpec {
  return {
    name: 'serve',
    description:
      'run the delay-queue server on a data directory, or as a node of a queue on Valkey/Redis',
    options: [
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
        name: 'connect-timeout',
        requires: 'redis',
        value: '<duration>',
        description:
          'with --redis: how long to keep trying to reach Valkey/Redis at start (down, restarting, loading its data) before giving up with ERR_TICKWHEEL_UNAVAILABLE',
        env: 'TICKWHEEL_CONNECT_TIMEOUT',
        default: 10_000,
        defaultText: '10s',
        parse: parseDuration,
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
        defaultText: '128',
        parse: integerParser(0, 1_048_576),
      },
      {
        name: 'max-wait',
        value: '<duration>',
        description: 'longest long poll of a receive',
        env: 'TICKWHEEL_MAX_WAIT',
        default: 20_000,
        defaultText: '20s',
        parse: parseDuration,
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
        defaultText: '100',
        parse: integerParser(1, 10_000),
      },
      {
        name: 'connection-timeout',
        value: '<duration>',
        description:
          'time a connection has to send a whole request, headers and body, from when it opens or the request starts; then 408 and closed',
        env: 'TICKWHEEL_CONNECTION_TIMEOUT',
        default: 30_000,
        defaultText: '30s',
        parse: parseDuration,
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
    ],
    run: (_args, flags) => serve(flags as unknown as ServeOptions, io),
  };
}

function repairCommand(io: CliIo): CommandSpec {
  return {
    name: 'repair',
    description:
      'say what a damaged data directory has lost (changing nothing); with --yes, drop it so the queue opens again',
    options: [
      {
        name: 'dir',
        value: '<path>',
        description: 'data directory',
        env: 'TICKWHEEL_DIR',
        default: './data',
      },
      {
        name: 'yes',
        description: 'drop the messages that cannot be recovered (keeps every other one)',
      },
      { name: 'json', description: 'print the report as JSON' },
    ],
    run: (_args, flags) => repair(flags as unknown as RepairOptions, io),
  };
}

function benchCommand(io: CliIo): CommandSpec {
  return {
    name: 'bench',
    description: 'run the benchmark suites (npm run bench:<suite>) from a clone of the repository',
    arguments: [
      {
        name: 'suites',
        description: 'timers, queue and/or http; default all three',
        variadic: true,
      },
    ],
    options: [{ name: 'list', description: 'show the suites and the npm scripts they run' }],
    passThrough: true,
    epilog: 'Arguments after -- go to each suite, e.g. tickwheel bench timers -- --quick',
    run: async ([args], flags) => {
      // Suite names first; from the first option (or --) on, everything goes to the suites.
      const words = args as string[];
      let split = words.findIndex((arg) => arg.startsWith('-'));
      if (split === -1) split = words.length;
      const rest = words.slice(words[split] === '--' ? split + 1 : split);
      await bench(words.slice(0, split), rest, flags as { list?: boolean }, io);
    },
  };
}

/** The CLI's commands, writing to `io`. */
function buildProgram(io: CliIo = processIo): ProgramSpec {
  return {
    name: 'tickwheel',
    description: 'Durable delay queue server and client: schedule messages for later, over HTTP.',
    version: VERSION,
    commands: [
      serveCommand(io),
      sendCommand(io),
      ...clientCommands(io),
      ...topicCommands(io),
      ...scheduleCommands(io),
      repairCommand(io),
      benchCommand(io),
    ],
  };
}

/**
 * Runs the CLI on `argv` (process.argv: the executable and the script first); resolves with the
 * exit status (a running server keeps the process alive).
 */
export async function main(
  argv: string[],
  io: CliIo = processIo,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  try {
    return await runProgram(buildProgram(io), argv.slice(2), io, env);
  } catch (err) {
    io.err(`tickwheel: ${describeFailure(err)}\n`);
    return err instanceof CliError ? err.exitCode : 1;
  }
}
