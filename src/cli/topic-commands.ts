/**
 * The commands on topics' settings, through the client SDK: topics (list, or one), pause,
 * resume, rate-limit. Each prints the topic(s) as the server answers them, as JSON.
 */

import { CLIENT_OPTIONS, clientFor, printJson, type ClientFlags } from './client-commands.js';
import { UsageError, type CommandSpec } from './args.js';
import type { CliIo } from './io.js';
import { integerParser } from './parse.js';

/** `off` (no limit) or deliveries per second. */
function parseRate(text: string): number | 'off' {
  if (text.trim().toLowerCase() === 'off') return 'off';
  const value = Number(text);
  if (text.trim() === '' || !Number.isFinite(value) || value <= 0) {
    throw new UsageError(
      `rate must be deliveries per second (a number above 0) or off, got ${text}`,
      'rate-limit',
    );
  }
  return value;
}

export function topicCommands(io: CliIo): CommandSpec[] {
  const onTopics = (name: string, description: string, verb: 'pause' | 'resume'): CommandSpec => ({
    name,
    description,
    arguments: [{ name: 'topics', required: true, variadic: true }],
    options: CLIENT_OPTIONS,
    run: async ([topics], flags) => {
      const client = clientFor(flags as unknown as ClientFlags);
      const answers = [];
      for (const topic of topics as string[]) answers.push(await client[verb](topic));
      printJson(io, answers.length === 1 ? answers[0] : answers);
    },
  });
  return [
    {
      name: 'topics',
      description: 'list topics with their settings (paused, rate limit) and counts, or show one',
      arguments: [{ name: 'topic', required: false }],
      options: CLIENT_OPTIONS,
      run: async ([topic], flags) => {
        const client = clientFor(flags as unknown as ClientFlags);
        printJson(
          io,
          topic === undefined ? await client.topicList() : await client.topicInfo(topic as string),
        );
      },
    },
    onTopics(
      'pause',
      'stop deliveries of topics until resumed (schedules are still accepted)',
      'pause',
    ),
    onTopics('resume', "deliver paused topics' messages again", 'resume'),
    {
      name: 'rate-limit',
      description: "limit a topic's deliveries per second (a token bucket), or remove the limit",
      arguments: [
        { name: 'topic', required: true },
        {
          name: 'rate',
          description: 'deliveries per second (0.001 to 1000000), or off',
          required: true,
        },
      ],
      options: [
        {
          name: 'burst',
          value: '<n>',
          description: 'deliveries saved up at most (default: the rate, rounded up)',
          parse: integerParser(1, 1_000_000),
        },
        ...CLIENT_OPTIONS,
      ],
      run: async ([topic, rateText], rawFlags) => {
        const flags = rawFlags as unknown as ClientFlags & { burst?: number };
        const rate = parseRate(rateText as string);
        if (rate === 'off' && flags.burst !== undefined) {
          throw new UsageError('--burst goes with a rate, not with off', 'rate-limit');
        }
        const rateLimit =
          rate === 'off'
            ? null
            : { perSecond: rate, ...(flags.burst === undefined ? {} : { burst: flags.burst }) };
        printJson(io, await clientFor(flags).configureTopic(topic as string, { rateLimit }));
      },
    },
  ];
}
