/**
 * Runs a benchmark runner's main(argv) as this process's work: `cleanup` (servers and data
 * directories the run started) runs when it ends, when it fails, and on SIGINT or SIGTERM (exit
 * code 130). Exit code: main's answer, 1 when it throws.
 */
export function runMain(main, cleanup, log) {
  for (const signal of ['SIGINT', 'SIGTERM']) {
    process.once(signal, () => {
      log(`${signal}: stopping`);
      void cleanup().finally(() => process.exit(130));
    });
  }
  main(process.argv.slice(2))
    .then(async (code) => {
      await cleanup();
      process.exitCode = code;
    })
    .catch(async (err) => {
      process.stderr.write(`${err.stack ?? err}\n`);
      await cleanup();
      process.exitCode = 1;
    });
}
