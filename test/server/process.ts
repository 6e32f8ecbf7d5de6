import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeAll } from 'vitest';

/** The built CLI; end-to-end tests run it as users do. `npm test` builds it first (pretest). */
export const CLI = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));

export function requireBuiltCli(): void {
  if (!existsSync(CLI)) {
    throw new Error(
      `${CLI} is missing: run \`npm run build\` first (\`npm test\` does it in pretest)`,
    );
  }
}

export interface ServerProcess {
  url: string;
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves with how the process ended. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGKILL, if still running; used in afterEach so no server outlives its test. */
  kill(): Promise<void>;
}

/** The line `tickwheel serve` prints once it serves, as text or inside a JSON log line. */
export const LISTENING = /tickwheel listening on (http:\/\/[^\s"]+)/;

export interface ServeOptions {
  env?: Record<string, string>;
  timeoutMs?: number;
  until?: RegExp;
  /** Runs the server under `ulimit -n <fdLimit>` (soft and hard), through bash. */
  fdLimit?: number;
}

/**
 * Starts `tickwheel serve --port 0` and resolves once it prints its address (or once stdout
 * matches `until`, whose first group is the URL). Rejects with the process's output if it
 * exits first or takes longer than `timeoutMs`.
 */
export function startServer(args: string[], options: ServeOptions = {}): Promise<ServerProcess> {
  requireBuiltCli();
  const command = [process.execPath, CLI, 'serve', '--port', '0', ...args];
  const [file, argv] =
    options.fdLimit === undefined
      ? [command[0], command.slice(1)]
      : ['bash', ['-c', `ulimit -n ${options.fdLimit} && exec "$@"`, 'bash', ...command]];
  const child = spawn(file, argv, {
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('close', (code, signal) => resolve({ code, signal })),
  );
  const kill = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
  };
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      void kill();
      reject(new Error(`server did not start in time\nstdout: ${out}\nstderr: ${err}`));
    }, options.timeoutMs ?? 15_000);
    const onData = () => {
      const match = (options.until ?? LISTENING).exec(out);
      if (match === null) return;
      clearTimeout(timer);
      child.stdout?.off('data', onData);
      resolve({
        url: match[1].replace('0.0.0.0', '127.0.0.1'),
        child,
        stdout: () => out,
        stderr: () => err,
        exited,
        kill,
      });
    };
    child.stdout?.on('data', onData);
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(
        new Error(
          `server exited (${code ?? signal}) before listening\nstdout: ${out}\nstderr: ${err}`,
        ),
      );
    });
  });
}

/** Runs the CLI to completion. */
export function runCli(
  args: string[],
  options: { env?: Record<string, string>; input?: string } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  requireBuiltCli();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      env: { ...process.env, ...options.env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(options.input ?? '');
  });
}

/**
 * Call once at the top of a test file: it checks that the CLI is built before the first test,
 * and returns `serve`, which starts a server (as startServer) that is killed when the test has
 * finished.
 */
export function useServers(): (args: string[], options?: ServeOptions) => Promise<ServerProcess> {
  const running: ServerProcess[] = [];
  beforeAll(() => requireBuiltCli());
  afterEach(async () => {
    await Promise.all(running.splice(0).map((server) => server.kill()));
  });
  return async (args, options = {}) => {
    const server = await startServer(args, options);
    running.push(server);
    return server;
  };
}
