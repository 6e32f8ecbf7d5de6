/** The commands on topics' settings (topics, pause, resume, rate-limit, push), through the client. */

import { MAX_TOPIC_PAGE } from '../protocol/limits.js';
import { clientCommand } from './client-commands.js';
import { UsageError, type CommandSpec } from './args.js';
import type { CliIo } from './io.js';
import { integerOption, integerParser, parsePayload } from './parse.js';

/** `off` (no limit) or deliveries per second. */
function parseRate(text: string): number | 'off' {
  if (text.trim().toLowerCase() === 'off') return 'off';
  const value = Number(text);
  if (text.trim() === '' || !(value >= 0.001 && value <= 1e6)) {
    throw new UsageError(
      `rate must be deliveries per second, 0.001 to 1000000, or off; got ${text}`,
      'tickwheel rate-limit',
    );
  }
  return value;
}

/** `--headers '{"Authorization": "Bearer x"}'`: an object of strings. */
function parseHeaders(text: string): Record<string, string> {
  const value = parsePayload(text);
  if (
    typeof value !== 'object' ||
    value === null ||
    Array.isArray(value) ||
    Object.values(value).some((v) => typeof v !== 'string')
  ) {
    throw new UsageError(
      `--headers must be a JSON object of strings, such as '{"Authorization": "Bearer x"}', got ${text}`,
      'tickwheel push',
    );
  }
  return value as Record<string, string>;
}

export function topicCommands(io: CliIo): CommandSpec[] {
  const onTopics = (name: string, description: string, verb: 'pause' | 'resume') =>
    clientCommand(io, {
      name,
      description,
      arguments: [{ name: 'topics', required: true, variadic: true }],
      run: async ([topics], client) => {
        const answers = [];
        for (const topic of topics as string[]) answers.push(await client[verb](topic));
        return answers.length === 1 ? answers[0] : answers;
      },
    });
  return [
    clientCommand(io, {
      name: 'topics',
      description:
        'list topics with their settings (paused, rate limit) and counts by name, a page at a time, or show one',
      arguments: [{ name: 'topic', required: false }],
      options: [
        integerOption('limit', 'topics at most on the page (default 100)', 1, MAX_TOPIC_PAGE),
        {
          name: 'cursor',
          value: '<cursor>',
          description: 'the cursor a previous page printed: the page after it',
        },
      ],
      run: async ([topic], client, { limit, cursor }) => {
        if (topic !== undefined) return client.topicInfo(topic as string);
        const page = await client.topicList({ limit, cursor });
        if (page.cursor !== undefined) io.err(`more: the next page is --cursor ${page.cursor}\n`);
        return page;
      },
    }),
    onTopics(
      'pause',
      'stop deliveries of topics until resumed (schedules are still accepted)',
      'pause',
    ),
    onTopics('resume', "deliver paused topics' messages again", 'resume'),
    clientCommand(io, {
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
        integerOption(
          'burst',
          'deliveries saved up at most (default: the rate, rounded up)',
          1,
          1e6,
        ),
      ],
      run: async ([topic, rateText], client, flags) => {
        const rate = parseRate(rateText as string);
        if (rate === 'off' && flags.burst !== undefined) {
          throw new UsageError('--burst goes with a rate, not with off', 'tickwheel rate-limit');
        }
        // Sent as JSON, which leaves out a burst that is undefined.
        const rateLimit = rate === 'off' ? null : { perSecond: rate, burst: flags.burst };
        return client.configureTopic(topic as string, { rateLimit });
      },
    }),
    clientCommand(io, {
      name: 'push',
      description:
        "have the server POST a topic's due messages to a URL, signed (docs/push.md), or stop",
      arguments: [
        { name: 'topic', required: true },
        { name: 'url', description: 'an http: or https: URL, or off', required: true },
      ],
      options: [
        {
          name: 'secret',
          value: '<text>',
          env: 'TICKWHEEL_PUSH_SECRET',
          description: 'the key requests are signed with, 16 to 512 characters',
        },
        {
          name: 'method',
          value: '<method>',
          description: 'default POST',
          choices: ['POST', 'PUT', 'PATCH'],
        },
        {
          name: 'headers',
          value: '<json>',
          description: 'headers sent with every request, as a JSON object',
          parse: parseHeaders,
        },
        {
          name: 'push-timeout',
          value: '<ms>',
          description: 'an attempt with no answer within this long fails (default 10000)',
          parse: integerParser(1, 600_000),
        },
        integerOption('concurrency', 'requests at once, at most (default 10)', 1, 1000),
      ],
      run: async ([topic, url], client, flags) => {
        if ((url as string).trim().toLowerCase() === 'off') {
          return client.configureTopic(topic as string, { push: null });
        }
        if (flags.secret === undefined) {
          throw new UsageError(
            'push needs --secret (or TICKWHEEL_PUSH_SECRET): the key its requests are signed with',
            'tickwheel push',
          );
        }
        if (flags.secret.length < 16 || flags.secret.length > 512) {
          throw new UsageError(
            `--secret must be 16 to 512 characters, got ${flags.secret.length}`,
            'tickwheel push',
          );
        }
        // Sent as JSON, which leaves out the options not given.
        const { secret, method, headers, pushTimeout: timeoutMs, concurrency } = flags;
        const push = { url: url as string, secret, method, headers, timeoutMs, concurrency };
        return client.configureTopic(topic as string, { push });
      },
    }),
  ];
}
