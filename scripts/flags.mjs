/**
 * Command-line flags for the project's scripts and benchmarks: `handlers` maps each flag to a
 * function that takes its value (the next word), or takes nothing for a flag without a value
 * (a handler declared with no parameter). An unknown flag, or a flag missing its value, throws
 * an Error that names it.
 */
export function parseFlags(argv, handlers) {
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const handle = Object.hasOwn(handlers, flag) ? handlers[flag] : undefined;
    if (handle === undefined) throw new Error(`unknown option ${flag}`);
    if (handle.length === 0) {
      handle();
      continue;
    }
    const value = argv[++i];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    handle(value);
  }
}
