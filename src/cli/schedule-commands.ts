/** The commands on recurring schedules (schedules, schedule, unschedule), through the client. */

import { UsageError, type CommandSpec } from './args.js';
import { clientCommand, printJson } from './client-commands.js';
import { CliError, type CliIo } from './io.js';
import { MAX_EVERY_MS, MIN_EVERY_MS } from '../queue/recurring-spec.js';
import { durationOption, integerOption, parsePayloadArgument, timeOption } from './parse.js';

export function scheduleCommands(io: CliIo): CommandSpec[] {
  return [
    clientCommand(io, {
      name: 'schedules',
      description: 'list the recurring schedules with their next occurrence, or show one',
      arguments: [{ name: 'name', required: false }],
      run: async ([name], client) => {
        if (name === undefined) return client.listSchedules();
        const schedule = await client.getSchedule(name as string);
        if (schedule === undefined) throw new CliError(`no schedule named ${name as string}`);
        return schedule;
      },
    }),
    clientCommand(io, {
      name: 'schedule',
      description:
        'create or replace a recurring schedule (--topic with --cron or --every), or pause / resume one',
      arguments: [{ name: 'name', required: true }],
      options: [
        { name: 'topic', value: '<topic>', description: 'topic of its messages' },
        {
          name: 'cron',
          value: '<expr>',
          description: "cron expression, e.g. '30 2 * * *'",
          conflicts: 'every',
        },
        { name: 'tz', value: '<zone>', description: 'IANA time zone of --cron (default UTC)' },
        durationOption('every', 'fixed interval, 1s to 366d', [MIN_EVERY_MS, MAX_EVERY_MS]),
        {
          name: 'payload',
          value: '<json>',
          description: 'payload of each occurrence (JSON or text)',
        },
        timeOption('start-at', 'no occurrence before'),
        timeOption('end-at', 'no occurrence after'),
        {
          name: 'catch-up',
          value: '<policy>',
          description: 'missed occurrences after downtime',
          choices: ['latest', 'all', 'none'],
        },
        {
          name: 'overlap',
          value: '<policy>',
          description: "'skip': none while the previous one is live",
          choices: ['allow', 'skip'],
        },
        integerOption(
          'max-attempts',
          'deliveries of each occurrence before it is a dead letter',
          1,
          1e4,
        ),
        {
          name: 'pause',
          description: 'pause the schedule (no occurrences until resumed)',
          conflicts: 'resume',
        },
        { name: 'resume', description: 'resume a paused schedule' },
      ],
      run: async ([name], client, flags) => {
        const defining =
          flags.topic !== undefined || flags.cron !== undefined || flags.every !== undefined;
        if (!defining) {
          if (!flags.pause && !flags.resume) {
            throw new UsageError(
              'give --topic with --cron or --every, or --pause / --resume',
              'tickwheel schedule',
            );
          }
          const changed = await client.updateSchedule(name as string, {
            paused: flags.pause === true,
          });
          if (changed === undefined) throw new CliError(`no schedule named ${name as string}`);
          return changed;
        }
        if (flags.topic === undefined)
          throw new UsageError('--topic is needed', 'tickwheel schedule');
        // Sent as JSON, which leaves out the options not given.
        return client.putSchedule(name as string, {
          topic: flags.topic,
          cron: flags.cron,
          timezone: flags.tz,
          everyMs: flags.every,
          payload:
            flags.payload === undefined
              ? undefined
              : parsePayloadArgument(flags.payload, '--payload'),
          startAt: flags.startAt,
          endAt: flags.endAt,
          catchUp: flags.catchUp,
          overlap: flags.overlap,
          maxAttempts: flags.maxAttempts,
          paused: flags.pause ? true : undefined,
        });
      },
    }),
    clientCommand(io, {
      name: 'unschedule',
      description: 'delete recurring schedules (and their next occurrence, if not yet due)',
      arguments: [{ name: 'names', required: true, variadic: true }],
      run: async ([names], client) => {
        const list = names as string[];
        const results: boolean[] = [];
        for (const name of list) results.push(await client.deleteSchedule(name));
        printJson(io, { deleted: results.filter(Boolean).length, results });
        const missing = list.filter((_, i) => !results[i]);
        if (missing.length > 0) throw new CliError(`no schedule named ${missing.join(', ')}`);
      },
    }),
  ];
}
