/** The `tickwheel` program: serve, repair and bench here; the client commands in their modules. */

import { VERSION } from '../server/version.js';
import { runProgram, type CommandSpec, type ProgramSpec } from './args.js';
import { bench } from './bench.js';
import { clientCommands, sendCommand } from './client-commands.js';
import { scheduleCommands } from './schedule-commands.js';
import { topicCommands } from './topic-commands.js';
import { CliError, describeFailure, processIo, type CliIo } from './io.js';
import { repair, REPAIR_OPTIONS, type RepairOptions } from './repair.js';
import { serve } from './serve.js';
import { SERVE_OPTIONS, type ServeOptions } from './serve-options.js';

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

function buildProgram(io: CliIo = processIo): ProgramSpec {
  return {
    name: 'tickwheel',
    description: 'Durable delay queue server and client: schedule messages for later, over HTTP.',
    version: VERSION,
    commands: [
      {
        name: 'serve',
        description:
          'run the delay-queue server on a data directory, or as a node of a queue on Valkey/Redis or PostgreSQL',
        options: SERVE_OPTIONS,
        run: (_args, flags) => serve(flags as ServeOptions, io),
      },
      sendCommand(io),
      ...clientCommands(io),
      ...topicCommands(io),
      ...scheduleCommands(io),
      {
        name: 'repair',
        description:
          'say what a damaged data directory has lost (changing nothing); with --yes, drop it so the queue opens again',
        options: REPAIR_OPTIONS,
        run: (_args, flags) => repair(flags as RepairOptions, io),
      },
      benchCommand(io),
    ],
  };
}

/** Runs the CLI on process.argv; resolves with the exit status (a server keeps running). */
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
