/* global fetch */
/**
 * Waits for a `tickwheel serve` process started on `url` to serve: /healthz answers 200. The
 * benches run it at --log-level warn (a log line per request would weigh on what they
 * measure), where it logs nothing at start, so they pick the port themselves (freePort in
 * scripts/valkey.mjs) rather than read it from a start-up line.
 */

/** Resolves once `url`/healthz answers 200; rejects if `child` exits first. */
export function serving(child, url, what = 'tickwheel serve') {
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout?.setEncoding('utf8').on('data', (chunk) => (out += chunk));
    const onExit = (code) => reject(new Error(`${what} exited (${code}) before serving:\n${out}`));
    child.once('exit', onExit);
    const probe = async () => {
      if (child.exitCode !== null) return;
      try {
        const answer = await fetch(`${url}/healthz`);
        if (answer.status === 200) {
          child.off('exit', onExit);
          resolve(url);
          return;
        }
      } catch {
        // Not listening yet.
      }
      setTimeout(probe, 50);
    };
    void probe();
  });
}
