/**
 * The push benchmark's processes talk over Node's IPC channel: the runner asks, a child
 * answers. A request is `{ id, type, ...fields }`; its answer `{ id, result }` or
 * `{ id, error }`. A child is ready once it has sent `{ ready: true, ...fields }` (a receiver
 * sends its port with it).
 */

import { fork } from 'node:child_process';

/**
 * Forks `script` (with `env` added to this process's, and node flags `execArgv`) and resolves
 * once it is ready: `{ pid, hello, call(type, fields), stop() }`.
 */
export function startChild(script, args = [], { env = {}, execArgv = [] } = {}) {
  const child = fork(script, args, {
    env: { ...process.env, ...env },
    execArgv,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const waiting = new Map();
  let nextId = 1;
  let exited = null;
  const failAll = (err) => {
    for (const { reject } of waiting.values()) reject(err);
    waiting.clear();
  };
  child.on('exit', (code, signal) => {
    exited = new Error(`${script} exited (${signal ?? code})`);
    failAll(exited);
  });
  const ready = new Promise((resolve, reject) => {
    child.on('message', (message) => {
      if (message.ready === true) {
        resolve(message);
        return;
      }
      const call = waiting.get(message.id);
      if (call === undefined) return;
      waiting.delete(message.id);
      if (message.error !== undefined) call.reject(new Error(`${script}: ${message.error}`));
      else call.resolve(message.result);
    });
    child.once('exit', () => reject(exited));
  });
  return ready.then((hello) => ({
    pid: child.pid,
    hello,
    call(type, fields = {}) {
      if (exited !== null) return Promise.reject(exited);
      const id = nextId++;
      return new Promise((resolve, reject) => {
        waiting.set(id, { resolve, reject });
        child.send({ id, type, ...fields });
      });
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const gone = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await gone;
    },
  }));
}

/** The child's side: answers each request with `handlers[type](fields)`, then says it is ready. */
export function answerRequests(handlers, hello = {}) {
  process.on('message', async ({ id, type, ...fields }) => {
    const handler = handlers[type];
    try {
      if (handler === undefined) throw new Error(`unknown request ${type}`);
      process.send({ id, result: await handler(fields) });
    } catch (err) {
      process.send({ id, error: err instanceof Error ? (err.stack ?? err.message) : String(err) });
    }
  });
  process.on('SIGTERM', () => process.exit(0));
  process.send({ ready: true, ...hello });
}

/** CPU seconds (user + system) this process has used. */
export function cpuSeconds() {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
}
