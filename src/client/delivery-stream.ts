/**
 * consume()'s deliveries over one POST /v1/topics/:topic/stream instead of a long poll per
 * batch. The window is the consumer's concurrency; a stream that ends or fails is thrown by the
 * next receive() (the Worker reports it and backs off) and opened again by the one after.
 */

import { clearTimeout, setTimeout } from 'node:timers';
import type { ReceivedMessage } from '../queue/types.js';
import type { ReceiveResponse } from '../protocol/wire.js';
import { fromWire } from './bodies.js';
import { overlong, TickwheelNetworkError } from './errors.js';
import { Wake } from '../wake.js';
import { streamBroke } from './transport.js';

/** Silence after which a stream counts as dead: three of the server's keep-alives. */
const STREAM_IDLE_MS = 45_000;
/**
 * The longest line kept while it is unfinished: a receive's default 8 MiB of payloads, or one
 * payload of up to 16 MiB as base64, with its deliveries' fields, fits several times over.
 */
export const MAX_STREAM_LINE_CHARS = 64 * 1024 * 1024;

export interface StreamSettings {
  topic: string;
  window: number;
  visibilityMs: number | undefined;
  /** Opens the stream (the client's transport: token, timeout, error answers). */
  open(body: object, signal: AbortSignal): Promise<Response>;
  nack(receipt: string, reason: string): PromiseLike<unknown>;
}

export class DeliveryStream {
  private readonly arrived: ReceivedMessage[] = [];
  private failure: unknown;
  private reading: Promise<void> | undefined;
  private controller: AbortController | undefined;
  private readonly arrivals = new Wake();
  private stopped = false;
  private listening = false;

  constructor(private readonly settings: StreamSettings) {}

  /** Up to `max` deliveries that came, waiting up to `waitMs` for the first. */
  async receive(max: number, waitMs: number, signal: AbortSignal): Promise<ReceivedMessage[]> {
    if (!this.stopped && !signal.aborted) {
      if (this.reading === undefined && this.failure === undefined) this.start(signal);
      if (this.arrived.length === 0 && this.failure === undefined) {
        await this.arrivals.wait(waitMs, signal);
      }
    }
    if (this.arrived.length > 0) return this.arrived.splice(0, max);
    const failure = this.failure;
    this.failure = undefined;
    if (failure !== undefined && !signal.aborted) throw failure;
    return [];
  }

  private start(signal: AbortSignal): void {
    const controller = new AbortController();
    this.controller = controller;
    if (!this.listening) {
      this.listening = true;
      signal.addEventListener('abort', () => this.stop(), { once: true });
    }
    this.reading = this.read(controller)
      .catch((err: unknown) => {
        // A silence set its own failure before it aborted the request.
        if (!this.stopped) this.failure ??= err;
      })
      .finally(() => {
        this.reading = undefined;
        this.arrivals.wake();
      });
  }

  private async read(controller: AbortController): Promise<void> {
    const { topic, window, visibilityMs } = this.settings;
    const body = visibilityMs === undefined ? { window } : { window, visibilityMs };
    // A silence as long as three keep-alives aborts the request; every chunk re-arms it.
    let idle: ReturnType<typeof setTimeout> | undefined;
    const listen = () => {
      clearTimeout(idle);
      idle = setTimeout(() => {
        this.failure = new TickwheelNetworkError(
          'ERR_TICKWHEEL_TIMEOUT',
          `the delivery stream of topic ${topic}: nothing came for ${STREAM_IDLE_MS} ms, not even a keep-alive`,
          undefined,
        );
        controller.abort();
      }, STREAM_IDLE_MS);
    };
    try {
      listen();
      const response = await this.settings.open(body, controller.signal);
      const decoder = new TextDecoder();
      // The unfinished line, in pieces joined once it ends: appending to one string and searching
      // it again at every chunk made a line of n chunks cost n^2.
      const pieces: string[] = [];
      let pending = 0;
      for await (const chunk of (response.body ?? []) as AsyncIterable<Uint8Array>) {
        listen();
        const text = decoder.decode(chunk, { stream: true });
        let start = 0;
        let end: number;
        while ((end = text.indexOf('\n', start)) !== -1) {
          pieces.push(text.slice(start, end));
          const { messages } = JSON.parse(pieces.join('')) as ReceiveResponse;
          pieces.length = pending = 0;
          start = end + 1;
          for (const message of messages) this.deliver(fromWire(message));
        }
        pieces.push(text.slice(start));
        pending += text.length - start;
        if (pending > MAX_STREAM_LINE_CHARS) {
          throw overlong(`the delivery stream of topic ${topic}`, MAX_STREAM_LINE_CHARS);
        }
      }
      if (!this.stopped) {
        throw new TickwheelNetworkError(
          'ERR_TICKWHEEL_NETWORK',
          `the delivery stream of topic ${topic} was ended by the server`,
          undefined,
        );
      }
    } catch (err) {
      throw streamBroke(`the delivery stream of topic ${topic}`, err);
    } finally {
      clearTimeout(idle);
    }
  }

  private deliver(message: ReceivedMessage): void {
    if (this.stopped) {
      this.settings.nack(message.receipt, 'the consumer closed').then(undefined, () => {});
      return;
    }
    this.arrived.push(message);
    this.arrivals.wake();
  }

  /** The consumer stopped: the stream closes, and what came but was not handed out goes back. */
  private stop(): void {
    this.stopped = true;
    this.controller?.abort();
    for (const message of this.arrived.splice(0)) this.deliver(message);
  }
}
