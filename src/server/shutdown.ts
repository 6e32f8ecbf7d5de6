/**
 * On SIGTERM / SIGINT the server closes (exit 0); a second signal, or over `graceMs`, exits 1.
 * A signal within `echoMs` of the first is the same one delivered twice, not a second: a
 * terminal's Ctrl-C reaches every process of its foreground group, so a server under `npm start`
 * gets it from the terminal and again from npm, which forwards it to its child.
 */

export interface Closable {
  close(): Promise<unknown>;
}

export interface ShutdownOptions {
  signals?: NodeJS.Signals[];
  /** Longest a graceful close may take before the process exits anyway. Default 30,000 ms. */
  graceMs?: number;
  /**
   * Progress lines for the operator, with how bad each is: `error` when the process exits
   * without a clean close. Default: stderr.
   */
  say?: (line: string, level: 'info' | 'error') => void;
  /** How soon after the first a signal is taken as that one again. Default 500 ms. */
  echoMs?: number;
  /** Ends the process. Default process.exit. */
  exit?: (code: number) => void;
}

/** Installs the signal handlers; returns a function that removes them. */
export function closeOnSignals(server: Closable, options: ShutdownOptions = {}): () => void {
  const signals = options.signals ?? ['SIGTERM', 'SIGINT'];
  const graceMs = options.graceMs ?? 30_000;
  const say = options.say ?? ((line: string) => process.stderr.write(`${line}\n`));
  const exit = options.exit ?? ((code: number) => process.exit(code));
  const echoMs = options.echoMs ?? 500;
  let closing = false;
  let firstAt = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    if (closing) {
      if (performance.now() - firstAt < echoMs) return;
      say(`tickwheel: ${signal} again, exiting now`, 'error');
      exit(1);
      return;
    }
    closing = true;
    firstAt = performance.now();
    say(
      `tickwheel: ${signal}, shutting down (finishing requests in flight; ${signal} again to exit at once)`,
      'info',
    );
    const end = (line: string, code: number) => {
      clearTimeout(timer);
      say(line, code === 0 ? 'info' : 'error');
      exit(code);
    };
    const timer = setTimeout(
      () => end(`tickwheel: shutdown took over ${graceMs} ms, exiting now`, 1),
      graceMs,
    );
    timer.unref();
    server.close().then(
      () => end('tickwheel: stopped', 0),
      (err: unknown) =>
        end(`tickwheel: error while shutting down: ${String((err as Error)?.message ?? err)}`, 1),
    );
  };
  for (const signal of signals) process.on(signal, onSignal);
  return () => {
    for (const signal of signals) process.off(signal, onSignal);
  };
}
