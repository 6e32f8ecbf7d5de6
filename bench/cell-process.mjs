/**
 * The child's side of a benchmark cell that runs in a process of its own (forked by a runner,
 * so that its RSS and CPU belong to it alone): the runner sends one request; the cell answers
 * with any number of progress messages, then one { type: 'result', result } or
 * { type: 'error', message }, and exits.
 */

import { fork } from 'node:child_process';

export function send(message) {
  return new Promise((resolve) => process.send(message, resolve));
}

/** Answers the runner's request with what `run(request)` resolves to, or its error, and exits. */
export function serveCell(run) {
  process.once('message', async (request) => {
    try {
      const result = await run(request);
      await send({ type: 'result', result });
      process.exit(0);
    } catch (err) {
      await send({
        type: 'error',
        message: err instanceof Error ? (err.stack ?? err.message) : String(err),
      });
      process.exit(1);
    }
  });
}

/**
 * The runner's side: forks `path` (with --expose-gc) and sends it `request`; resolves with its
 * result once it has exited, rejects with its error or when it exits without an answer. The
 * child is in `children` while it runs, for a runner that must kill what is left on a signal.
 */
export function forkCell(path, request, { onProgress, children }) {
  const child = fork(path, [], {
    execArgv: ['--expose-gc'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  children.add(child);
  return new Promise((resolve, reject) => {
    let answer;
    child.on('message', (message) => {
      if (message.type === 'progress') onProgress(message.text);
      else answer = message;
    });
    child.once('close', (code, signal) => {
      children.delete(child);
      if (answer?.type === 'result') resolve(answer.result);
      else if (answer?.type === 'error') reject(new Error(answer.message));
      else reject(new Error(`cell exited (${signal ?? code}) without a result`));
    });
    child.send(request);
  });
}
