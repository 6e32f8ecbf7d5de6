/**
 * The consumer processes of the kill measures (bench/cluster/run.mjs, bench/postgres/node-kill.mjs)
 * report each delivery as a line on stdout; the runner reads them.
 *
 *   // in the consumer process
 *   const write = lineWriter();                      // flushed every 20 ms
 *   write(`${due} ${Date.now()}`);
 *   process.stdout.write('ready\n');
 *
 *   // in the runner
 *   const { child, started } = startLines([script, ...args], (line) => ...);
 *   await started;                                   // its 'ready' line came
 */

import { spawn } from 'node:child_process';
import { setInterval } from 'node:timers';

/** A function that queues a line for stdout; the queue is written every 20 ms. */
export function lineWriter() {
  let lines = '';
  setInterval(() => {
    if (lines === '') return;
    process.stdout.write(lines);
    lines = '';
  }, 20);
  return (line) => {
    lines += `${line}\n`;
  };
}

/** Runs `node <args>`: each line it prints but 'ready' goes to onLine; `started` once 'ready'. */
export function startLines(args, onLine) {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  let buffer = '';
  let ready;
  const started = new Promise((resolve, reject) => {
    ready = resolve;
    child.on('exit', (code) => reject(new Error(`${args[0]} exited (${code}) before ready`)));
  });
  // Unhandled if the runner never waits for it.
  started.catch(() => {});
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk) => {
    buffer += chunk;
    let end;
    while ((end = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, end);
      buffer = buffer.slice(end + 1);
      if (line === 'ready') ready();
      else onLine(line);
    }
  });
  return { child, started };
}
