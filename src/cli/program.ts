/**
 * The `tickwheel` command. Every flag also reads an environment variable (shown in --help);
 * a flag given on the command line wins over the environment, which wins over the default.
 *
 *   tickwheel serve --dir ./data --port 7700 [--host] [--token] [--fsync]
 *   tickwheel send <topic> [payload] [--delay 30s | --at <time>] [--id]
 *   tickwheel get <id> | cancel <id> | receive <topic> | stats
 *   tickwheel bench [timers|queue|http ...]
 */

import { Command, Option } from 'commander';
import { TickwheelClient, DEFAULT_URL } from '../client/index.js';
import { TickwheelHttpError, TickwheelNetworkError } from '../client/errors.js';
import type { ScheduleRequest } from '../queue/message.js';
import { LOG_LEVELS } from '../server/settings.js';
import { VERSION } from '../server/version.js';
import { bench } from './bench.js';
import { CliError, processIo, type CliIo } from './io.js';
import { integerParser, parseDuration, parsePayload, parseTime } from './parse.js';
import { serve, type ServeOptions } from './serve.js';

interface ClientFlags {
  url: string;
  token?: string;
  timeout: number;
}

function clientOptions(command: Command): Command {
  return command
    .addOption(new Option('--url <url>', 'server URL').env('TICKWHEEL_URL').default(DEFAULT_URL))
    .addOption(new Option('--token <token>', 'bearer token of the server').env('TICKWHEEL_TOKEN'))
    .addOption(
      new Option('--timeout <duration>', 'time allowed for the request')
        .env('TICKWHEEL_TIMEOUT')
        .default(10_000, '10s')
        .argParser(parseDuration),
    );
}

function clientFor(flags: ClientFlags): TickwheelClient {
  return new TickwheelClient({
    url: flags.url,
    timeoutMs: Math.max(1, flags.timeout),
    ...(flags.token === undefined || flags.token === '' ? {} : { token: flags.token }),
  });
}

function printJson(io: CliIo, value: unknown): void {
  io.out(`${JSON.stringify(value, null, 2)}\n`);
}

/** The CLI, writing to `io`. Call parseAsync(argv) on it. */
export function buildProgram(io: CliIo = processIo): Command {
  const program = new Command('tickwheel')
    .description('Durable delay queue server and client: schedule messages for later, over HTTP.')
    .version(VERSION, '-v, --version')
    .enablePositionalOptions()
    .showHelpAfterError('(add --help for usage)')
    .configureOutput({ writeOut: (text) => io.out(text), writeErr: (text) => io.err(text) });

  program
    .command('serve')
    .description('run the delay-queue server on a data directory')
    .addOption(
      new Option('--dir <path>', 'data directory (created if missing)')
        .env('TICKWHEEL_DIR')
        .default('./data'),
    )
    .addOption(
      new Option('--port <port>', 'TCP port; 0 picks a free one')
        .env('TICKWHEEL_PORT')
        .default(7700)
        .argParser(integerParser(0, 65535)),
    )
    .addOption(
      new Option(
        '--host <address>',
        'address to bind (default: 127.0.0.1, or 0.0.0.0 when a token is set)',
      ).env('TICKWHEEL_HOST'),
    )
    .addOption(
      new Option('--token <token>', 'require "Authorization: Bearer <token>" on /v1 routes').env(
        'TICKWHEEL_TOKEN',
      ),
    )
    .addOption(
      new Option(
        '--fsync <policy>',
        'when a 201 is sent: after fsync (batch: group commit; always: one fsync per change) or after the write (never)',
      )
        .env('TICKWHEEL_FSYNC')
        .choices(['batch', 'always', 'never'])
        .default('batch'),
    )
    .addOption(
      new Option('--body-limit <bytes>', 'largest request body; larger ones get 413')
        .env('TICKWHEEL_BODY_LIMIT')
        .default(1024 * 1024, '1048576 (1 MiB)')
        .argParser(integerParser(1024, 1024 ** 3)),
    )
    .addOption(
      new Option('--max-wait <duration>', 'longest long poll of a receive')
        .env('TICKWHEEL_MAX_WAIT')
        .default(20_000, '20s')
        .argParser(parseDuration),
    )
    .addOption(
      new Option(
        '--log-level <level>',
        'log as JSON lines on stdout at this level (start-up lines included); unset: text for people, warnings as JSON on stderr',
      )
        .env('TICKWHEEL_LOG_LEVEL')
        .choices(LOG_LEVELS as string[]),
    )
    .action((flags: ServeOptions) => serve(flags, io));

  clientOptions(
    program
      .command('send')
      .description('schedule a message')
      .argument('<topic>', 'topic of the message')
      .argument(
        '[payload]',
        "JSON payload; text that is not JSON is sent as a string; '-' reads stdin; default null",
      )
      .addOption(
        new Option('--delay <duration>', 'deliver after this long: 1500 (ms), 30s, 5m, 2h, 1d')
          .argParser(parseDuration)
          .conflicts('at'),
      )
      .addOption(
        new Option('--at <time>', 'deliver at this time: ISO 8601 or epoch ms').argParser(
          parseTime,
        ),
      )
      .option('--id <id>', 'dedup key: sending the same id again while pending changes nothing')
      .option(
        '--max-attempts <n>',
        'deliveries before it becomes a dead letter',
        integerParser(1, 10_000),
      ),
  ).action(
    async (
      topic: string,
      payloadText: string | undefined,
      flags: ClientFlags & { delay?: number; at?: number; id?: string; maxAttempts?: number },
    ) => {
      const payload =
        payloadText === undefined
          ? null
          : parsePayload(payloadText === '-' ? await io.readStdin() : payloadText);
      const message: ScheduleRequest = { topic, payload };
      if (flags.delay !== undefined) message.delayMs = flags.delay;
      if (flags.at !== undefined) message.deliverAt = flags.at;
      if (flags.id !== undefined) message.id = flags.id;
      if (flags.maxAttempts !== undefined) message.maxAttempts = flags.maxAttempts;
      const result = await clientFor(flags).schedule(message);
      printJson(io, { ...result, due: new Date(result.deliverAt).toISOString() });
    },
  );

  clientOptions(
    program.command('get').description('show the state of a message').argument('<id>'),
  ).action(async (id: string, flags: ClientFlags) => {
    const info = await clientFor(flags).get(id);
    if (info === undefined) throw new CliError(`no message with id ${id}`);
    printJson(io, info);
  });

  clientOptions(
    program.command('cancel').description('cancel a pending message').argument('<id>'),
  ).action(async (id: string, flags: ClientFlags) => {
    if (!(await clientFor(flags).cancel(id))) {
      throw new CliError(`no pending message with id ${id}`);
    }
    printJson(io, { cancelled: true });
  });

  clientOptions(
    program
      .command('receive')
      .description('take ready messages of a topic and print them')
      .argument('<topic>')
      .option('--max <n>', 'messages at most', integerParser(1, 1000), 1)
      .option('--wait <duration>', 'wait this long for a message', parseDuration, 0)
      .option(
        '--ack',
        'acknowledge them once printed (otherwise they come back after the visibility timeout)',
      ),
  ).action(
    async (topic: string, flags: ClientFlags & { max: number; wait: number; ack?: boolean }) => {
      const client = clientFor(flags);
      const messages = await client.receive(topic, { max: flags.max, waitMs: flags.wait });
      printJson(io, messages);
      if (flags.ack === true && messages.length > 0) {
        await client.ackMany(messages.map((message) => message.receipt));
      }
    },
  );

  clientOptions(program.command('stats').description("print the server's queue statistics")).action(
    async (flags: ClientFlags) => {
      printJson(io, await clientFor(flags).stats());
    },
  );

  program
    .command('bench')
    .description('run the benchmark suites (npm run bench:<suite>) from a clone of the repository')
    .argument('[suites...]', 'timers, queue and/or http; default all three')
    .option('--list', 'show the suites and the npm scripts they run')
    .passThroughOptions()
    .addHelpText(
      'after',
      '\nArguments after -- go to each suite, e.g. tickwheel bench timers -- --quick',
    )
    .action(async (_suites: string[], flags: { list?: boolean }, command: Command) => {
      // Suite names first; from the first option (or --) on, everything goes to the suites.
      const args = command.args;
      let split = args.findIndex((arg) => arg.startsWith('-'));
      if (split === -1) split = args.length;
      const rest = args.slice(args[split] === '--' ? split + 1 : split);
      await bench(args.slice(0, split), rest, flags, io);
    });

  return program;
}

/** What the user sees when a command fails: one line, no stack trace. */
export function describeFailure(err: unknown): string {
  if (err instanceof CliError) return err.message;
  if (err instanceof TickwheelHttpError) return `${err.message} (${err.code}, HTTP ${err.status})`;
  if (err instanceof TickwheelNetworkError) {
    return `cannot reach the server: ${err.message}`;
  }
  const error = err as { code?: unknown; message?: unknown };
  if (typeof error?.code === 'string' && typeof error.message === 'string') {
    return `${error.message} (${error.code})`;
  }
  return err instanceof Error ? err.message : String(err);
}

/** Runs the CLI; resolves with the exit status (a running server keeps the process alive). */
export async function main(argv: string[], io: CliIo = processIo): Promise<number> {
  const program = buildProgram(io);
  try {
    await program.parseAsync(argv);
    return 0;
  } catch (err) {
    io.err(`tickwheel: ${describeFailure(err)}\n`);
    return err instanceof CliError ? err.exitCode : 1;
  }
}
