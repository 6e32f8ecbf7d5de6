/** Where the CLI writes: the process's streams, or buffers in tests. */

import { TickwheelHttpError, TickwheelNetworkError } from '../client/errors.js';
import { TickwheelError, type CliErrorCode } from '../errors.js';

export interface CliIo {
  /** Results (JSON) and status lines. */
  out(text: string): void;
  /** Errors and warnings. */
  err(text: string): void;
  /** The whole of stdin, for payloads given as '-'. */
  readStdin(): Promise<string>;
  /** Whether `out` goes to a terminal (a person reads it); false when not said. */
  outIsTerminal?(): boolean;
}

export const processIo: CliIo = {
  out: (text) => void process.stdout.write(text),
  err: (text) => void process.stderr.write(text),
  outIsTerminal: () => process.stdout.isTTY === true,
  readStdin: async () => {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  },
};

/** Thrown by commands to end with a message and an exit status, without a stack trace. */
export class CliError extends TickwheelError<CliErrorCode> {
  readonly exitCode: number;
  constructor(message: string, exitCode = 1) {
    super('ERR_TICKWHEEL_COMMAND_FAILED', message);
    this.name = 'CliError';
    this.exitCode = exitCode;
  }
}

/** What the user sees when a command fails: one line, no stack trace. */
export function describeFailure(err: unknown): string {
  if (err instanceof CliError) return err.message;
  if (err instanceof TickwheelHttpError && err.code === 'ERR_TICKWHEEL_UNAUTHORIZED') {
    // The server's message speaks of the header; the CLI sends it from --token.
    const given = /not valid/.test(err.message)
      ? 'the token given is not valid'
      : 'it needs a token';
    return `${given}: give it with --token or TICKWHEEL_TOKEN (${err.code}, HTTP ${err.status})`;
  }
  if (err instanceof TickwheelHttpError) return `${err.message} (${err.code}, HTTP ${err.status})`;
  if (err instanceof TickwheelNetworkError && err.code === 'ERR_TICKWHEEL_NETWORK') {
    return `cannot reach the server: ${err.message}; is \`tickwheel serve\` running there? (the address comes from --url or TICKWHEEL_URL)`;
  }
  if (err instanceof TickwheelNetworkError) return `cannot reach the server: ${err.message}`;
  const error = err as { code?: unknown; message?: unknown };
  if (typeof error?.code === 'string' && typeof error.message === 'string') {
    return `${error.message} (${error.code})`;
  }
  return err instanceof Error ? err.message : String(err);
}
