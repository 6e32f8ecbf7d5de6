/**
 * The trace context stored with a message is durable: a plain `node` process on the built
 * package schedules messages with one and is killed (SIGKILL) once the schedules resolved; the
 * data directory, reopened, delivers each message with its context, the one due in an hour
 * (read back from its SCHEDULE record, never held in memory) as well as the one due now.
 */

import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock/index.js';
import { DelayQueue } from '../../src/delay-queue.js';
import { useTempDirs } from '../support/temp-dir.js';
import { waitFor } from '../support/wait-for.js';

const tempDir = useTempDirs('trace-durability');
const dist = new URL('../../dist/delay-queue.js', import.meta.url).href;
const PARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
const OTHER = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00';

const SCRIPT = `
  const { DelayQueue } = await import(${JSON.stringify(dist)});
  const queue = await DelayQueue.open({ dir: process.argv[1] });
  await queue.scheduleMany([
    { topic: 't', id: 'now', payload: 1, trace: { traceparent: '${PARENT}', tracestate: 'congo=t61rcWkgMzE' } },
    { topic: 't', id: 'later', payload: 2, delayMs: 3600000, trace: { traceparent: '${OTHER}' } },
    { topic: 't', id: 'plain', payload: 3 },
  ]);
  console.log('scheduled');
  setInterval(() => {}, 1000);
`;

describe('the trace context of a message', () => {
  it('survives a SIGKILL of the process that scheduled it', async () => {
    const dir = tempDir();
    const child = spawn(process.execPath, ['--input-type=module', '-e', SCRIPT, dir], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
    const exited = new Promise((resolve) => child.on('exit', resolve));
    try {
      await waitFor(() => out.includes('scheduled') || err !== '', { timeoutMs: 30_000 });
      expect(err).toBe('');
    } finally {
      child.kill('SIGKILL');
      await exited;
    }

    // Two hours on: both due at once after the reopen.
    const clock = new ManualClock(Date.now() + 2 * 3_600_000);
    const queue = await DelayQueue.open({ dir, clock });
    try {
      const received = await queue.receive('t', { max: 3 });
      const traces = Object.fromEntries(received.map((m) => [m.id, m.trace]));
      expect(traces).toEqual({
        now: { traceparent: PARENT, tracestate: 'congo=t61rcWkgMzE' },
        later: { traceparent: OTHER },
        plain: undefined,
      });
    } finally {
      await queue.close();
    }
  });
});
