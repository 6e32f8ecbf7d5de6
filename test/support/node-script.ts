/**
 * Runs an ES module given as text in a plain `node` child process, without blocking this one:
 * a test worker whose event loop is held by a synchronous spawn cannot answer its runner.
 */

import { spawn } from 'node:child_process';

export interface ScriptRun {
  /** The exit code; null if the process was killed (by `timeoutMs` or a signal). */
  status: number | null;
  /** stdout, trimmed. */
  out: string;
  stderr: string;
}

export function runNodeScript(script: string, timeoutMs = 20_000): Promise<ScriptRun> {
  return runNode(['--input-type=module', '-e', script], { timeoutMs });
}

/** `node <args>` in `cwd`, killed after `timeoutMs`. */
export function runNode(
  args: string[],
  { cwd, timeoutMs = 20_000 }: { cwd?: string; timeoutMs?: number } = {},
): Promise<ScriptRun> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, args, {
      cwd,
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: timeoutMs,
    });
    let out = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', fail);
    child.on('close', (status) => done({ status, out: out.trim(), stderr }));
  });
}
