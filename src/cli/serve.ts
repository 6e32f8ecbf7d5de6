/**
 * `tickwheel serve`: opens the queue on a data directory, listens, and shuts down gracefully
 * on SIGTERM / SIGINT. Without a token it binds to loopback only unless told otherwise, and
 * says so; the last line it prints at start is `tickwheel listening on http://HOST:PORT`.
 */

import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import type { FsyncPolicy } from '../queue-entry.js';
import type { LogLevel } from '../server/settings.js';
import type { CliIo } from './io.js';

export interface ServeOptions {
  dir: string;
  port: number;
  host?: string;
  token?: string;
  fsync: FsyncPolicy;
  bodyLimit: number;
  maxWait: number;
  logLevel: LogLevel;
}

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

export async function serve(options: ServeOptions, io: CliIo): Promise<void> {
  // Loaded here, so that client commands do not pay for Fastify.
  const { closeOnSignals, createServer } = await import('../server/index.js');
  const token = options.token === '' ? undefined : options.token;
  const host = options.host ?? (token === undefined ? '127.0.0.1' : '0.0.0.0');
  const server = await createServer({
    dir: options.dir,
    fsync: options.fsync,
    bodyLimit: options.bodyLimit,
    maxWaitMs: options.maxWait,
    logLevel: options.logLevel,
    ...(token === undefined ? {} : { token }),
  });
  try {
    await server.listen({ port: options.port, host });
  } catch (err) {
    await server.close();
    throw err;
  }
  closeOnSignals(server, { say: (line) => io.err(`${line}\n`) });
  const address = server.server.address() as AddressInfo;
  const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const recovery = server.queue.recovery;
  io.out(
    `data in ${resolve(options.dir)} (fsync ${options.fsync})` +
      (recovery === undefined
        ? '\n'
        : `, recovered ${recovery.live} live messages in ${Math.round(recovery.durationMs)} ms` +
          (recovery.snapshot === 'used'
            ? ` (from a snapshot and ${formatMiB(recovery.replayedBytes)} of log)\n`
            : recovery.snapshot === 'none'
              ? '\n'
              : ` (snapshot ${recovery.snapshot}; replayed the whole log)\n`)),
  );
  if (recovery !== undefined && recovery.corrupt.length > 0) {
    io.err(`warning: skipped ${recovery.corrupt.length} damaged records while recovering\n`);
  }
  const repaired = recovery?.repair;
  if (repaired?.applied === true) {
    io.err(
      `warning: ${resolve(options.dir)} was repaired at ${repaired.at}: dropped ` +
        `${repaired.lost} messages that could not be read (${repaired.damage.length} damaged ` +
        `${repaired.damage.length === 1 ? 'stretch' : 'stretches'} of the log); see ` +
        `${resolve(options.dir, 'repair.json')}\n`,
    );
  }
  if (token === undefined) {
    if (isLoopback(host)) {
      io.out(
        `no token: listening on ${host} only. To accept other machines, set --token ` +
          '(or TICKWHEEL_TOKEN) and --host 0.0.0.0\n',
      );
    } else {
      io.err(
        `warning: no token and listening on ${host}: anyone who can reach this port can ` +
          'schedule, read and cancel messages. Set --token (or TICKWHEEL_TOKEN)\n',
      );
    }
  } else {
    io.out('token required: /v1 requests need "Authorization: Bearer <token>"\n');
  }
  // Last, so that whoever waits for this line has seen the others.
  io.out(`tickwheel listening on http://${shown}:${address.port}\n`);
}

function formatMiB(bytes: number): string {
  return `${(bytes / 1048576).toFixed(1)} MiB`;
}
