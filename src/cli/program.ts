/**
 * The `tickwheel` command. Every flag also reads an environment variable (shown in --help);
 * a flag given on the command line wins over the environment, which wins over the default.
 *
 *   tickwheel serve --dir ./data --port 7700 [--host] [--token] [--fsync]
 *   tickwheel send <topic> [payload] [--delay 30s | --at <time>] [--id]
 *   tickwheel get <id> | cancel <id> | reschedule <id> --delay 5m | --at <time>
 *   tickwheel receive <topic> | ack <receipt...> | nack <receipt...> [--delay]
 *   tickwheel dead <topic> [--limit] | requeue <id...> [--delay] | stats
 *   tickwheel repair --dir ./data [--yes] [--json]
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
import { repair, type RepairOptions } from './repair.js';
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

/** Why a reschedule found nothing to move, in the server's words. */
async function notPending(client: TickwheelClient, id: string): Promise<string> {
  const info = await client.get(id);
  if (info === undefined) return `no message with id ${id}`;
  if (info.status === 'inflight') return `message ${id} is in flight; ack or nack it first`;
  if (info.status === 'dead') return `message ${id} is dead; requeue it instead`;
  return `message ${id} is ${info.status}, not pending`;
}

async function notDead(client: TickwheelClient, id: string): Promise<string> {
  const info = await client.get(id);
  return info === undefined
    ? `no dead message with id ${id}`
    : `message ${id} is ${info.status}; only dead letters can be requeued`;
}

/** Ends with status 1 when any receipt was not a live delivery (results are printed first). */
function failUnlessAll(results: boolean[], receipts: string[]): void {
  const missed = receipts.filter((_, i) => !results[i]);
  if (missed.length === 0) return;
  throw new CliError(
    `${missed.length} of ${receipts.length} receipts were not live deliveries (unknown, expired, or acked or nacked already): ${missed.join(' ')}`,
  );
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
        'acknowledge them once printed (otherwise: tickwheel ack or nack their receipts, or they come back after the visibility timeout)',
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

  clientOptions(
    program
      .command('reschedule')
      .description('move a scheduled or ready message to a new due time')
      .argument('<id>')
      .addOption(
        new Option('--delay <duration>', 'due this long from now: 1500 (ms), 30s, 5m, 2h, 1d')
          .argParser(parseDuration)
          .conflicts('at'),
      )
      .addOption(
        new Option('--at <time>', 'due at this time: ISO 8601 or epoch ms').argParser(parseTime),
      ),
  ).action(async (id: string, flags: ClientFlags & { delay?: number; at?: number }) => {
    if (flags.delay === undefined && flags.at === undefined) {
      throw new CliError('give the new due time with --delay <duration> or --at <time>');
    }
    const client = clientFor(flags);
    const when = flags.at === undefined ? { delayMs: flags.delay } : { deliverAt: flags.at };
    if (!(await client.reschedule(id, when))) throw new CliError(await notPending(client, id));
    const info = await client.get(id);
    printJson(io, {
      rescheduled: true,
      id,
      ...(info === undefined
        ? {}
        : { deliverAt: info.deliverAt, due: new Date(info.deliverAt).toISOString() }),
    });
  });

  clientOptions(
    program
      .command('ack')
      .description('acknowledge deliveries: the messages are done')
      .argument('<receipts...>', 'receipts that receive printed'),
  ).action(async (receipts: string[], flags: ClientFlags) => {
    const results = await clientFor(flags).ackMany(receipts);
    printJson(io, { acked: results.filter(Boolean).length, results });
    failUnlessAll(results, receipts);
  });

  clientOptions(
    program
      .command('nack')
      .description("give deliveries back: redelivered after --delay, or each message's backoff")
      .argument('<receipts...>', 'receipts that receive printed')
      .option(
        '--delay <duration>',
        "redeliver after this long (default: each message's backoff)",
        parseDuration,
      ),
  ).action(async (receipts: string[], flags: ClientFlags & { delay?: number }) => {
    const results = await clientFor(flags).nackMany(
      receipts,
      flags.delay === undefined ? {} : { delayMs: flags.delay },
    );
    printJson(io, { nacked: results.filter(Boolean).length, results });
    failUnlessAll(results, receipts);
  });

  clientOptions(
    program
      .command('dead')
      .description('list the dead letters of a topic (messages that used up their attempts)')
      .argument('<topic>')
      .option('--limit <n>', 'messages at most, oldest first', integerParser(1, 10_000), 100),
  ).action(async (topic: string, flags: ClientFlags & { limit: number }) => {
    printJson(io, await clientFor(flags).deadLetters(topic, flags.limit));
  });

  clientOptions(
    program
      .command('requeue')
      .description('put dead letters back, with their attempts reset')
      .argument('<ids...>', 'ids of dead messages')
      .option('--delay <duration>', 'due this long from now (default: at once)', parseDuration),
  ).action(async (ids: string[], flags: ClientFlags & { delay?: number }) => {
    const client = clientFor(flags);
    const options = flags.delay === undefined ? {} : { delayMs: flags.delay };
    const outcomes = await Promise.allSettled(ids.map((id) => client.requeue(id, options)));
    const results = outcomes.map((outcome) => outcome.status === 'fulfilled' && outcome.value);
    printJson(io, { requeued: results.filter(Boolean).length, results });
    const reasons: string[] = [];
    for (let i = 0; i < ids.length; i++) {
      const outcome = outcomes[i];
      if (outcome.status === 'rejected')
        reasons.push(`${ids[i]}: ${describeFailure(outcome.reason)}`);
      else if (!outcome.value) reasons.push(await notDead(client, ids[i]));
    }
    if (reasons.length > 0) throw new CliError(reasons.join('; '));
  });

  clientOptions(program.command('stats').description("print the server's queue statistics")).action(
    async (flags: ClientFlags) => {
      printJson(io, await clientFor(flags).stats());
    },
  );

  program
    .command('repair')
    .description(
      'say what a damaged data directory has lost (changing nothing); with --yes, drop it so the queue opens again',
    )
    .addOption(new Option('--dir <path>', 'data directory').env('TICKWHEEL_DIR').default('./data'))
    .option('--yes', 'drop the messages that cannot be recovered (keeps every other one)')
    .option('--json', 'print the report as JSON')
    .action((flags: RepairOptions) => repair(flags, io));

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
