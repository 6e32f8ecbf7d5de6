/**
 * The command line of `tickwheel`, on node:util's parseArgs (the CLI needs no package outside
 * Node); --help is generated from the commands' specs. An option's value comes from the command
 * line, else its environment variable, else its default, and goes through its parser (or
 * choices) wherever it comes from; the last repeat wins, except for a list option's.
 */

import { parseArgs } from 'node:util';
import { TickwheelError, type CliErrorCode } from '../errors.js';
import { closest } from '../spelling.js';
import { CliError, type CliIo } from './io.js';

export interface OptionSpec {
  /** Long name without the dashes; `body-limit` arrives as `flags.bodyLimit`. */
  name: string;
  /** One letter, for `-v` style. */
  short?: string;
  /** How the value is shown in --help, e.g. `<path>`; absent for an option that takes none. */
  value?: string;
  description: string;
  /** Environment variable read when the option is not on the command line. */
  env?: string;
  default?: unknown;
  /** The default as --help shows it, when JSON would not say it well. */
  defaultText?: string;
  parse?: (text: string) => unknown;
  choices?: readonly string[];
  /** Names of options that cannot be given together with this one. */
  conflicts?: string | readonly string[];
  /** Names of options without one of which this one means nothing (given or from its environment). */
  requires?: string | readonly string[];
  /** Its parser returns an array, and repeats of the option add to it (`--allow a --allow b`). */
  list?: boolean;
}

interface ArgumentSpec {
  name: string;
  description?: string;
  required?: boolean;
  /** Takes every remaining argument; only the last argument can be variadic. */
  variadic?: boolean;
}

type Flags = Record<string, unknown>;

type CamelCase<Name extends string> = Name extends `${infer Head}-${infer Tail}`
  ? `${Head}${Capitalize<CamelCase<Tail>>}`
  : Name;

/** What an option gives its command: its parser's result, one of its choices, its text, or true. */
type OptionValue<Option> = Option extends { parse: (text: string) => infer Value }
  ? Value
  : Option extends { choices: readonly (infer Choice)[] }
    ? Choice
    : Option extends { value: string }
      ? string
      : boolean;

/** The flags of a command with `Options` (a const tuple): present always where there is a default. */
export type FlagsOf<Options extends readonly OptionSpec[]> = {
  [
    Option in Options[number] as Option extends { default: unknown }
      ? CamelCase<Option['name']>
      : never
  ]: OptionValue<Option>;
} & {
  [
    Option in Options[number] as Option extends { default: unknown }
      ? never
      : CamelCase<Option['name']>
  ]?: OptionValue<Option>;
};

export interface CommandSpec {
  name: string;
  description: string;
  arguments?: readonly ArgumentSpec[];
  options?: readonly OptionSpec[];
  /** Help text after the options. */
  epilog?: string;
  /** Options are read only before the first argument; the rest are handed on as arguments. */
  passThrough?: boolean;
  /** Positional arguments in declaration order (a variadic one as an array), then the flags. */
  run(args: unknown[], flags: Flags): Promise<void> | void;
}

export interface ProgramSpec {
  name: string;
  description: string;
  version: string;
  commands: readonly CommandSpec[];
}

/** A command line that cannot be run as given; the message says what is wrong with it. */
export class UsageError extends CliError {
  override readonly code: CliErrorCode = 'ERR_TICKWHEEL_USAGE';
  constructor(message: string, command?: string) {
    super(`${message}\n(${command === undefined ? '' : `${command} `}--help shows the usage)`);
    this.name = 'UsageError';
  }
}

/** A parser (or a list of choices) refused a value; thrown by parsers with what is accepted. */
export class InvalidArgumentError extends TickwheelError<'ERR_TICKWHEEL_INVALID_ARGUMENT'> {
  constructor(message: string) {
    super('ERR_TICKWHEEL_INVALID_ARGUMENT', message);
    this.name = 'InvalidArgumentError';
  }
}

const HELP: OptionSpec = { name: 'help', short: 'h', description: 'show this help' };
const VERSION: OptionSpec = { name: 'version', short: 'v', description: 'print the version' };

function camelCase(name: string): string {
  return name.replace(/-([a-z])/g, (_, letter: string) => letter.toUpperCase());
}

function flagText(option: OptionSpec): string {
  const long = `--${option.name}${option.value === undefined ? '' : ` ${option.value}`}`;
  return option.short === undefined ? long : `-${option.short}, ${long}`;
}

function argumentText(argument: ArgumentSpec): string {
  const name = `${argument.name}${argument.variadic === true ? '...' : ''}`;
  return argument.required === true ? `<${name}>` : `[${name}]`;
}

function optionHelp(option: OptionSpec): string {
  const notes: string[] = [];
  if (option.choices !== undefined) notes.push(`choices: ${option.choices.join(', ')}`);
  if (option.defaultText !== undefined) notes.push(`default: ${option.defaultText}`);
  else if (option.default !== undefined) notes.push(`default: ${JSON.stringify(option.default)}`);
  if (option.env !== undefined) notes.push(`env: ${option.env}`);
  return notes.length === 0 ? option.description : `${option.description} (${notes.join(', ')})`;
}

function table(rows: Array<[string, string]>): string {
  const width = Math.max(...rows.map(([left]) => left.length)) + 2;
  return rows.map(([left, right]) => `  ${left.padEnd(width)}${right}\n`).join('');
}

function commandHelp(program: ProgramSpec, command: CommandSpec): string {
  const usage = [command.name, '[options]', ...(command.arguments ?? []).map(argumentText)];
  let text = `Usage: ${program.name} ${usage.join(' ')}\n\n${command.description}\n`;
  const args = (command.arguments ?? []).filter((argument) => argument.description !== undefined);
  if (args.length > 0) {
    text += `\nArguments:\n${table(args.map((argument) => [argument.name, argument.description ?? '']))}`;
  }
  const options = [...(command.options ?? []), HELP];
  text += `\nOptions:\n${table(options.map((option) => [flagText(option), optionHelp(option)]))}`;
  return command.epilog === undefined ? text : `${text}\n${command.epilog}\n`;
}

function programHelp(program: ProgramSpec): string {
  const commands: Array<[string, string]> = program.commands.map((command) => [
    [command.name, ...(command.arguments ?? []).map(argumentText)].join(' '),
    command.description,
  ]);
  commands.push(['help [command]', 'show the help of a command']);
  return (
    `Usage: ${program.name} [options] <command>\n\n${program.description}\n\n` +
    `Options:\n${table([VERSION, HELP].map((option) => [flagText(option), option.description]))}\n` +
    `Commands:\n${table(commands)}`
  );
}

function convert(option: OptionSpec, text: string, source: string, command: string): unknown {
  try {
    if (option.choices !== undefined && !option.choices.includes(text)) {
      throw new InvalidArgumentError(`give one of ${option.choices.join(', ')}`);
    }
    return option.parse === undefined ? text : option.parse(text);
  } catch (err) {
    if (!(err instanceof InvalidArgumentError)) throw err;
    throw new UsageError(`${source}: ${err.message} (got ${JSON.stringify(text)})`, command);
  }
}

/** parseArgs' refusal in the CLI's words (the closest option; a value starting with a dash). */
function parseFailure(
  code: string,
  message: string,
  args: readonly string[],
  specs: readonly OptionSpec[],
): string {
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    const name = /'(-{1,2}[^']*)'/.exec(message)?.[1] ?? '';
    const known = specs.map((spec) => spec.name);
    const guess = name.startsWith('--') ? closest(name.slice(2).split('=')[0], known) : undefined;
    return `unknown option '${name}'` + (guess === undefined ? '' : ` (did you mean --${guess}?)`);
  }
  if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
    const at = args.findIndex(
      (arg, i) => arg.startsWith('--') && args[i + 1]?.startsWith('-') === true,
    );
    if (at !== -1 && /^-\d/.test(args[at + 1])) {
      return `option ${args[at]} got ${args[at + 1]}: a negative value is not accepted here`;
    }
    if (at !== -1) return `option ${args[at]} needs a value`;
  }
  return message.replace(/\s*\n\s*/g, ' ');
}

/** Splits `--list timers -- --quick` into the leading options and everything after them. */
function splitLeadingOptions(args: string[], options: readonly OptionSpec[]): number {
  const flags = options.filter((option) => option.value === undefined);
  const isFlag = (arg: string) =>
    flags.some(
      (option) =>
        arg === `--${option.name}` || (option.short !== undefined && arg === `-${option.short}`),
    );
  const split = args.findIndex((arg) => !isFlag(arg));
  return split === -1 ? args.length : split;
}

interface Parsed {
  help: boolean;
  positionals: string[];
  flags: Flags;
}

function parseCommand(
  command: CommandSpec,
  args: string[],
  env: NodeJS.ProcessEnv,
  label: string,
): Parsed {
  const specs = [...(command.options ?? []), HELP];
  const split = command.passThrough === true ? splitLeadingOptions(args, specs) : args.length;
  const optionArgs = args.slice(0, split);
  const rest = args.slice(split);

  let tokens;
  try {
    ({ tokens } = parseArgs({
      args: optionArgs,
      options: Object.fromEntries(
        specs.map((option) => [
          option.name,
          {
            type: option.value === undefined ? ('boolean' as const) : ('string' as const),
            ...(option.short === undefined ? {} : { short: option.short }),
          },
        ]),
      ),
      allowPositionals: true,
      strict: true,
      tokens: true,
    }));
  } catch (err) {
    const error = err as { code?: unknown; message?: unknown };
    if (typeof error.code === 'string' && error.code.startsWith('ERR_PARSE_ARGS_')) {
      throw new UsageError(
        parseFailure(error.code, String(error.message), optionArgs, specs),
        label,
      );
    }
    throw err;
  }

  const flags: Flags = {};
  const given = new Set<string>();
  const positionals: string[] = [];
  let help = false;
  for (const token of tokens) {
    if (token.kind === 'positional') positionals.push(token.value);
    if (token.kind !== 'option') continue;
    if (token.name === 'help') {
      help = true;
      continue;
    }
    const option = specs.find((spec) => spec.name === token.name)!;
    const key = camelCase(option.name);
    const value =
      option.value === undefined
        ? true
        : convert(option, token.value ?? '', `option --${option.name}`, label);
    const before = flags[key];
    flags[key] =
      option.list === true && Array.isArray(before) && Array.isArray(value)
        ? [...(before as unknown[]), ...(value as unknown[])]
        : value;
    given.add(option.name);
  }
  if (help) return { help, positionals, flags };

  const present = (name: string) => {
    const spec = specs.find((candidate) => candidate.name === name);
    return given.has(name) || (spec?.env !== undefined && env[spec.env] !== undefined);
  };
  const names = (spec: string | readonly string[] | undefined) =>
    spec === undefined ? [] : typeof spec === 'string' ? [spec] : spec;
  for (const option of command.options ?? []) {
    const conflict = names(option.conflicts).find(present);
    if (conflict !== undefined && given.has(option.name)) {
      throw new UsageError(
        `option --${option.name} cannot be used together with --${conflict}`,
        label,
      );
    }
    const requires = names(option.requires);
    if (requires.length > 0 && present(option.name) && !requires.some(present)) {
      const where = given.has(option.name)
        ? `option --${option.name}`
        : `${option.env} (--${option.name})`;
      const needed = requires.map((name) => `--${name}`).join(' or ');
      throw new UsageError(
        `${where} is used only with ${needed}: give ${requires.length === 1 ? needed : 'one of them'} too, or leave it out`,
        label,
      );
    }
  }
  for (const option of command.options ?? []) {
    if (given.has(option.name)) continue;
    const fromEnv = option.env === undefined ? undefined : env[option.env];
    const value =
      fromEnv === undefined
        ? option.default
        : convert(option, fromEnv, `environment variable ${option.env}`, label);
    if (value !== undefined) flags[camelCase(option.name)] = value;
  }
  return { help, positionals: [...positionals, ...rest], flags };
}

function bindArguments(command: CommandSpec, positionals: string[], label: string): unknown[] {
  const specs = command.arguments ?? [];
  const values: unknown[] = [];
  for (const [index, argument] of specs.entries()) {
    values.push(argument.variadic === true ? positionals.slice(index) : positionals[index]);
    if (argument.required === true && positionals[index] === undefined) {
      throw new UsageError(`missing required argument '${argument.name}'`, label);
    }
  }
  const variadic = specs.at(-1)?.variadic === true;
  if (!variadic && positionals.length > specs.length) {
    throw new UsageError(
      `too many arguments: ${label} takes ${specs.length === 0 ? 'none' : `at most ${specs.length}`}, got ${positionals.length}`,
      label,
    );
  }
  return values;
}

/** Runs the command `args` names; resolves with the exit status. Commands fail by throwing. */
export async function runProgram(
  program: ProgramSpec,
  args: string[],
  io: CliIo,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  const [first, ...rest] = args;
  if (first === undefined) {
    io.err(programHelp(program));
    return 1;
  }
  if (first === '-h' || first === '--help') {
    io.out(programHelp(program));
    return 0;
  }
  if (first === '-v' || first === '--version') {
    io.out(`${program.version}\n`);
    return 0;
  }
  if (first === 'help') {
    const target = program.commands.find((command) => command.name === rest[0]);
    if (rest[0] !== undefined && target === undefined) {
      throw new UsageError(`unknown command '${rest[0]}'`, program.name);
    }
    io.out(target === undefined ? programHelp(program) : commandHelp(program, target));
    return 0;
  }
  const command = program.commands.find((candidate) => candidate.name === first);
  if (command === undefined) {
    throw new UsageError(
      first.startsWith('-') ? `unknown option '${first}'` : `unknown command '${first}'`,
      program.name,
    );
  }
  const label = `${program.name} ${command.name}`;
  const parsed = parseCommand(command, rest, env, label);
  if (parsed.help) {
    io.out(commandHelp(program, command));
    return 0;
  }
  await command.run(bindArguments(command, parsed.positionals, label), parsed.flags);
  return 0;
}
