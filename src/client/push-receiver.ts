/**
 * The receiving end of HTTP push delivery (docs/push.md), as a Node http listener: unsigned or
 * stale requests get 401 before their body is read; then the body (at most `maxBytes`) is
 * verified and the handler called, in a `process <topic>` span continuing the request's trace.
 */

import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  checkCallback,
  checkKnownOptions,
  checkOption,
  describe,
  invalidOption,
  optionNames,
} from '../validate.js';
import {
  checkPushHeaders,
  checkPushOptions,
  verifyPush,
  type PushDelivery,
  type VerifyPushOptions,
} from '../protocol/push-signature.js';
import { traceContextOfHeaders, type TraceContext } from '../protocol/trace-context.js';
import { endProcess, runProcessing, startProcess } from '../queue/tracing.js';
import { messageOf } from './transport.js';

/** A pushed message, as the handler gets it. */
export interface PushedMessage extends PushDelivery {
  /** The JSON payload decoded, or the raw bytes (a Buffer) of one given as bytes. */
  payload: unknown;
  /** The W3C trace context of the request's `traceparent` and `tracestate`, if it had one. */
  trace?: TraceContext;
}

export interface PushListenerOptions extends VerifyPushOptions {
  /** Largest body read, in bytes; a larger one is answered 413. Default 16 MiB; Infinity: no limit. */
  maxBytes?: number;
  /** Methods accepted; default POST, PUT and PATCH (the methods a push target can use). */
  methods?: readonly string[];
}

const DEFAULT_MAX_BYTES = 16 * 1024 * 1024;

const LISTENER_OPTIONS = optionNames<PushListenerOptions>({
  secret: true,
  toleranceSeconds: true,
  now: true,
  maxBytes: true,
  methods: true,
});

export function pushListener(
  options: PushListenerOptions,
  handler: (message: PushedMessage) => unknown,
): (request: IncomingMessage, response: ServerResponse) => void {
  // Checked now: a bad option is a mistake of the code, not of a request.
  const check = checkPushOptions(options, 'pushListener');
  checkKnownOptions(options, LISTENER_OPTIONS, 'pushListener()');
  checkCallback(handler, 'pushListener: handler');
  const maxBytes =
    options.maxBytes === Infinity
      ? Infinity
      : checkOption(
          options.maxBytes ?? DEFAULT_MAX_BYTES,
          'pushListener: options.maxBytes',
          0,
          Number.MAX_SAFE_INTEGER,
          true,
        );
  const methods = options.methods ?? ['POST', 'PUT', 'PATCH'];
  if (!Array.isArray(methods) || methods.some((method) => typeof method !== 'string')) {
    throw invalidOption(
      `pushListener: options.methods must be an array of HTTP methods such as ['POST'], got ${describe(methods)}`,
    );
  }
  return (request, response) => {
    if (!methods.includes(request.method ?? '')) {
      response.setHeader('allow', methods.join(', '));
      const message = `method ${request.method} not accepted`;
      refuse(response, 405, 'ERR_TICKWHEEL_INVALID_REQUEST', message);
      request.resume();
      return;
    }
    if (request.readableEnded) {
      // A body parser (express.json(), say) read it first: the raw bytes signed are gone.
      const message =
        'the request body was read before pushListener: mount it before any body parser';
      return refuse(response, 500, 'ERR_TICKWHEEL_PUSH_FAILED', message);
    }
    try {
      checkPushHeaders(request.headers, check);
    } catch (err) {
      response.setHeader('connection', 'close');
      return refuse(response, 401, 'ERR_TICKWHEEL_PUSH_SIGNATURE', (err as Error).message);
    }
    readBody(request, maxBytes).then(
      async (body) => {
        if (body === undefined) {
          response.setHeader('connection', 'close');
          const message = `body over ${maxBytes} bytes`;
          return refuse(response, 413, 'ERR_TICKWHEEL_BODY_TOO_LARGE', message);
        }
        let delivery: PushDelivery;
        try {
          delivery = verifyPush({ headers: request.headers, body }, options);
        } catch (err) {
          const code = (err as { code?: string }).code ?? 'ERR_TICKWHEEL_PUSH_SIGNATURE';
          return refuse(response, 401, code, (err as Error).message);
        }
        let payload: unknown;
        try {
          payload = decode(request.headers['content-type'], body);
        } catch (err) {
          return refuse(response, 400, 'ERR_TICKWHEEL_INVALID_REQUEST', (err as Error).message);
        }
        const message: PushedMessage = { ...delivery, payload };
        const trace = traceContextOfHeaders(request.headers);
        if (trace !== undefined) message.trace = trace;
        const processing = startProcess(message.topic, {
          id: message.id,
          attempts: message.attempt,
          trace,
        });
        try {
          await (processing === undefined
            ? handler(message)
            : runProcessing(processing, handler, message));
          if (processing !== undefined) endProcess(processing, undefined, false);
        } catch (err) {
          if (processing !== undefined) endProcess(processing, err, true);
          return refuse(response, 500, 'ERR_TICKWHEEL_PUSH_FAILED', messageOf(err));
        }
        response.writeHead(204).end();
      },
      (err: unknown) => {
        // The request broke off while its body was read: nobody is left to answer.
        response.destroy(err as Error);
      },
    );
  };
}

/** The body, or undefined if it is over `maxBytes` (the rest is then not read). */
function readBody(request: IncomingMessage, maxBytes: number): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    request.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        // Not read further: the answer goes out and the connection closes.
        request.removeAllListeners('data');
        request.pause();
        resolve(undefined);
        return;
      }
      chunks.push(chunk);
    });
    request.on('end', () => resolve(Buffer.concat(chunks)));
    request.on('error', reject);
  });
}

function decode(type: string | undefined, body: Buffer): unknown {
  if (body.length === 0) return undefined;
  if (type !== undefined && /^application\/json\b/i.test(type)) {
    return JSON.parse(body.toString('utf8'));
  }
  return body;
}

function refuse(response: ServerResponse, status: number, code: string, message: string): void {
  response.writeHead(status, { 'content-type': 'application/json; charset=utf-8' });
  response.end(JSON.stringify({ error: { code, message } }));
}
