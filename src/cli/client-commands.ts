/** The commands that talk to a server through the client (--url, --token, --timeout), JSON out. */

import { TickwheelClient, DEFAULT_URL, type TickwheelHttpError } from '../client/index.js';
import { MAX_TOPIC_PAGE } from '../protocol/limits.js';
import { LIST_MAX_LIMIT } from '../queue/list.js';
import type { CommandSpec, FlagsOf, OptionSpec } from './args.js';
import { CliError, describeFailure, type CliIo } from './io.js';
import {
  durationOption,
  integerOption,
  parsePayloadArgument,
  parsePositiveDuration,
  timeOption,
} from './parse.js';

const CLIENT_OPTIONS = [
  {
    name: 'url',
    value: '<url>',
    description: 'server URL',
    env: 'TICKWHEEL_URL',
    default: DEFAULT_URL,
  },
  {
    name: 'token',
    value: '<token>',
    description: 'bearer token of the server',
    env: 'TICKWHEEL_TOKEN',
  },
  {
    name: 'timeout',
    value: '<duration>',
    description: 'time allowed for the request',
    env: 'TICKWHEEL_TIMEOUT',
    default: 10_000,
    defaultText: '10s',
    parse: parsePositiveDuration,
  },
] as const satisfies readonly OptionSpec[];

type ClientFlags = FlagsOf<typeof CLIENT_OPTIONS>;

/** A client whose cancel, rescheduleTo and requeue fail with the server's reason for refusing. */
class CliClient extends TickwheelClient {
  protected override refused(refusal: TickwheelHttpError): never {
    throw new CliError(refusal.message);
  }
}

function clientFor(flags: ClientFlags): TickwheelClient {
  return new CliClient({
    url: flags.url,
    timeoutMs: Math.max(1, flags.timeout),
    ...(flags.token === undefined || flags.token === '' ? {} : { token: flags.token }),
  });
}

export function printJson(io: CliIo, value: unknown): void {
  io.out(`${JSON.stringify(value, null, 2)}\n`);
}

/** A command that talks to a server: `run` is given a client for the command line's flags. */
interface ClientCommandSpec<Options extends readonly OptionSpec[]> extends Omit<
  CommandSpec,
  'options' | 'run'
> {
  options?: Options;
  run(
    args: unknown[],
    client: TickwheelClient,
    flags: ClientFlags & FlagsOf<Options>,
  ): Promise<unknown>;
}

/** The command of `spec`, with the client options; prints what `run` returns (if any) as JSON. */
export function clientCommand<const Options extends readonly OptionSpec[] = []>(
  io: CliIo,
  spec: ClientCommandSpec<Options>,
): CommandSpec {
  const { run, options = [], ...command } = spec;
  return {
    ...command,
    options: [...options, ...CLIENT_OPTIONS],
    run: async (args, flags) => {
      const clientFlags = flags as ClientFlags & FlagsOf<Options>;
      const answer = await run(args, clientFor(clientFlags), clientFlags);
      if (answer !== undefined) printJson(io, answer);
    },
  };
}

const RECEIPTS = [
  {
    name: 'receipts',
    description: 'receipts that receive printed',
    required: true,
    variadic: true,
  },
];

/** Prints how many receipts were live deliveries, then ends with status 1 unless all were. */
function printSettled(io: CliIo, verb: string, results: boolean[], receipts: string[]): void {
  printJson(io, { [verb]: results.filter(Boolean).length, results });
  const missed = receipts.filter((_, i) => !results[i]);
  if (missed.length === 0) return;
  throw new CliError(
    `${missed.length} of ${receipts.length} receipts were not live deliveries (unknown, expired, or acked or nacked already): ${missed.join(' ')}`,
  );
}

export function sendCommand(io: CliIo): CommandSpec {
  return clientCommand(io, {
    name: 'send',
    description: 'schedule a message',
    arguments: [
      { name: 'topic', description: 'topic of the message', required: true },
      {
        name: 'payload',
        description:
          "JSON payload (text starting with { or [ must be JSON; other text is sent as a string); '-' reads stdin; default null",
      },
    ],
    options: [
      {
        ...durationOption('delay', 'deliver after this long: 1500 (ms), 30s, 5m, 2h, 1d'),
        conflicts: 'at',
      },
      timeOption('at', 'deliver at this time: ISO 8601 or epoch ms'),
      {
        name: 'id',
        value: '<id>',
        description: 'dedup key: sending the same id again while pending changes nothing',
      },
      integerOption('max-attempts', 'deliveries before it becomes a dead letter', 1, 10_000),
    ],
    run: async ([topic, payloadText], client, flags) => {
      const text = payloadText === '-' ? await io.readStdin() : (payloadText as string | undefined);
      if (payloadText === '-' && text?.trim() === '') {
        throw new CliError("stdin is empty: give the payload there, or 'null' for none");
      }
      const payload = text === undefined ? null : parsePayloadArgument(text, 'the payload');
      // Sent as JSON, which leaves out the options not given.
      const result = await client.schedule({
        topic: topic as string,
        payload,
        delayMs: flags.delay,
        deliverAt: flags.at,
        id: flags.id,
        maxAttempts: flags.maxAttempts,
      });
      return { ...result, due: new Date(result.deliverAt).toISOString() };
    },
  });
}

/** `tickwheel list <topic>`: a page as JSON on stdout; how to get the next one on stderr. */
function listCommand(io: CliIo): CommandSpec {
  return clientCommand(io, {
    name: 'list',
    description: "list a topic's pending messages (scheduled, ready, in flight) by due time",
    arguments: [{ name: 'topic', required: true }],
    options: [
      timeOption('from', 'due at or after this time: ISO 8601 or epoch ms'),
      timeOption('until', 'due before this time: ISO 8601 or epoch ms'),
      integerOption('limit', 'messages at most on the page (default 100)', 1, LIST_MAX_LIMIT),
      {
        name: 'cursor',
        value: '<cursor>',
        description: 'the cursor a previous page printed: the page after it',
      },
    ],
    run: async ([topic], client, flags) => {
      const { from, until, limit, cursor } = flags;
      const page = await client.list({ topic: topic as string, from, until, limit, cursor });
      printJson(io, {
        messages: page.messages.map((info) => ({
          ...info,
          due: new Date(info.deliverAt).toISOString(),
        })),
        ...(page.cursor === undefined ? {} : { cursor: page.cursor }),
      });
      if (page.cursor !== undefined) {
        io.err(`more: the next page is --cursor ${page.cursor}\n`);
      }
    },
  });
}

export function clientCommands(io: CliIo): CommandSpec[] {
  return [
    clientCommand(io, {
      name: 'get',
      description: 'show the state of a message',
      arguments: [{ name: 'id', required: true }],
      run: async ([id], client) => {
        const info = await client.get(id as string);
        if (info === undefined) throw new CliError(`no message with id ${id as string}`);
        return info;
      },
    }),
    clientCommand(io, {
      name: 'cancel',
      description: 'cancel a pending message',
      arguments: [{ name: 'id', required: true }],
      run: async ([id], client) => {
        // Refused: CliClient throws the server's reason.
        await client.cancel(id as string);
        return { cancelled: true };
      },
    }),
    clientCommand(io, {
      name: 'receive',
      description: 'take ready messages of a topic and print them',
      arguments: [{ name: 'topic', required: true }],
      options: [
        { ...integerOption('max', 'messages at most', 1, 1000), default: 1 },
        { ...durationOption('wait', 'wait this long for a message'), default: 0 },
        {
          name: 'ack',
          description:
            'acknowledge them once printed (otherwise: tickwheel ack or nack their receipts, or they come back after the visibility timeout)',
        },
      ],
      run: async ([topic], client, flags) => {
        const messages = await client.receive(topic as string, {
          max: flags.max,
          waitMs: flags.wait,
        });
        printJson(io, messages);
        if (flags.ack === true && messages.length > 0) {
          await client.ackMany(messages.map((message) => message.receipt));
        }
      },
    }),
    clientCommand(io, {
      name: 'reschedule',
      description: 'move a scheduled or ready message to a new due time',
      arguments: [{ name: 'id', required: true }],
      options: [
        {
          ...durationOption('delay', 'due this long from now: 1500 (ms), 30s, 5m, 2h, 1d'),
          conflicts: 'at',
        },
        timeOption('at', 'due at this time: ISO 8601 or epoch ms'),
      ],
      run: async ([id], client, flags) => {
        if (flags.delay === undefined && flags.at === undefined) {
          throw new CliError('give the new due time with --delay <duration> or --at <time>');
        }
        const when = flags.at === undefined ? { delayMs: flags.delay } : { deliverAt: flags.at };
        // Refused: CliClient throws the server's reason, so deliverAt is a number.
        const deliverAt = (await client.rescheduleTo(id as string, when)) as number;
        return { rescheduled: true, id, deliverAt, due: new Date(deliverAt).toISOString() };
      },
    }),
    clientCommand(io, {
      name: 'ack',
      description: 'acknowledge deliveries: the messages are done',
      arguments: RECEIPTS,
      run: async ([receipts], client) => {
        const list = receipts as string[];
        printSettled(io, 'acked', await client.ackMany(list), list);
      },
    }),
    clientCommand(io, {
      name: 'nack',
      description: "give deliveries back: redelivered after --delay, or each message's backoff",
      arguments: RECEIPTS,
      options: [
        durationOption('delay', "redeliver after this long (default: each message's backoff)"),
        {
          name: 'reason',
          value: '<text>',
          description: "why the deliveries failed: kept as each message's lastError",
        },
      ],
      run: async ([receipts], client, flags) => {
        const list = receipts as string[];
        const results = await client.nackMany(list, { delayMs: flags.delay, reason: flags.reason });
        printSettled(io, 'nacked', results, list);
      },
    }),
    listCommand(io),
    clientCommand(io, {
      name: 'dead',
      description: 'list the dead letters of a topic (messages that used up their attempts)',
      arguments: [{ name: 'topic', required: true }],
      options: [
        { ...integerOption('limit', 'messages at most, oldest first', 1, 10_000), default: 100 },
      ],
      run: ([topic], client, flags) => client.deadLetters(topic as string, flags.limit),
    }),
    clientCommand(io, {
      name: 'requeue',
      description: 'put dead letters back, with their attempts reset',
      arguments: [
        { name: 'ids', description: 'ids of dead messages', required: true, variadic: true },
      ],
      options: [durationOption('delay', 'due this long from now (default: at once)')],
      run: async ([ids], client, flags) => {
        const list = ids as string[];
        const options = flags.delay === undefined ? {} : { delayMs: flags.delay };
        const outcomes = await Promise.allSettled(list.map((id) => client.requeue(id, options)));
        const results = outcomes.map((outcome) => outcome.status === 'fulfilled' && outcome.value);
        printJson(io, { requeued: results.filter(Boolean).length, results });
        // A refusal is the server's reason (CliClient), which names the id.
        const reasons = outcomes.flatMap((outcome, i) =>
          outcome.status === 'fulfilled'
            ? []
            : outcome.reason instanceof CliError
              ? [outcome.reason.message]
              : [`${list[i]}: ${describeFailure(outcome.reason)}`],
        );
        if (reasons.length > 0) throw new CliError(reasons.join('; '));
      },
    }),
    clientCommand(io, {
      name: 'stats',
      description: "print the server's queue statistics",
      options: [
        integerOption(
          'topics',
          'topics named, those with the most messages; the rest are summed (default 100)',
          0,
          MAX_TOPIC_PAGE,
        ),
      ],
      run: (_args, client, { topics }) => client.stats({ topics }),
    }),
  ];
}
