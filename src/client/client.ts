/**
 * TickwheelClient: the embedded DelayQueue API over HTTP, with the same names, arguments and
 * results (`cancel` false for an unknown id, `get` undefined, byte payloads as Buffers).
 */

import type { NewDueTime, QueueOperations } from '../queue/api.js';
import {
  checkCallback,
  checkFlag,
  checkOption,
  checkOptionsObject,
  describe,
  invalidOption,
} from '../validate.js';
import type {
  Consumer,
  MessageHandler,
  MessageInfo,
  NackOptions,
  ReceivedMessage,
  ReceiveOptions,
} from '../queue/types.js';
import { MAX_NACK_DELAY_MS, MAX_WAIT_MS } from '../protocol/limits.js';
import type { ListOptions, ListPage, StatsOptions, TopicListOptions } from '../protocol/model.js';
import { checkListOptions } from '../queue/list.js';
import { checkStatsOptions, checkTopicListOptions } from '../queue/topic-pages.js';
import { checkReceiveOptions } from '../queue/options.js';
import type {
  AckResponse,
  BatchResponse,
  DeadLettersResponse,
  ListResponse,
  ScheduleBodyRecurring,
  ScheduleListResponse,
  WireSchedule,
  TopicListResponse,
  TopicUpdateBody,
  WireTopic,
  HealthResponse,
  NackResponse,
  ReceiveResponse,
  RescheduleResponse,
  ScheduleResult,
  StatsResponse,
  WireMessageInfo,
} from '../protocol/wire.js';
import type { ScheduleRequest } from '../queue/message.js';
import { checkConsumeOptions, Worker } from '../queue/worker.js';
import {
  checkBatch,
  checkDueTime,
  fromWire,
  refuseDelay,
  refuseMessage,
  refuseOption,
  segment,
  sendable,
  sendableReceipts,
  toBody,
} from './bodies.js';
import { TickwheelHttpError } from './errors.js';
import {
  isHealth,
  isMessageInfo,
  isMessagePage,
  isSchedule,
  isScheduleList,
  isStats,
  isTopic,
  isTopicList,
  listOf,
  says,
} from './answers.js';
import { consumerSource, type ClientConsumeOptions } from './consumer.js';
import { checkIdleTimeout, streamEvents, type ClientWatchOptions } from './events.js';
import { openStream, Transport, type Exchange, type TransportOptions } from './transport.js';
import {
  callTimeout,
  checkClientOptions,
  MAX_TIMEOUT_MS,
  type AckCallOptions,
  type CallOptions,
  type ClientOptions,
} from './options.js';
import { checkWatch, type QueueEvent } from '../queue/events.js';
import { activeTrace } from '../queue/tracing.js';

/**
 * `Payload` types the payloads scheduled and received (`new TickwheelClient<Order>(...)`): the
 * caller's promise, not checked when a message arrives.
 */
export class TickwheelClient<Payload = unknown> implements QueueOperations<Payload> {
  readonly url: string;
  private readonly transport: Transport;
  private readonly transportOptions: TransportOptions;
  /** Open event streams (events()), ended by close(). */
  private readonly streams = new Set<AbortController>();
  private readonly consumers = new Set<Consumer>();

  constructor(options: ClientOptions = {}) {
    this.transportOptions = checkClientOptions(options);
    this.url = this.transportOptions.url;
    this.transport = new Transport(this.transportOptions);
  }

  /**
   * Resolves once the server has made the message durable (HTTP 201). One without an id gets one
   * here, so that retries (after a network error, an unknown outcome) cannot schedule it twice.
   */
  async schedule(
    message: ScheduleRequest<Payload>,
    options: CallOptions = {},
  ): Promise<ScheduleResult> {
    const { topic, ...body } = toBody(message);
    return this.call(options, {
      method: 'POST',
      path: `/v1/topics${segment(topic, 'topic')}/messages`,
      body,
      refuse: (err) => refuseMessage(message, '', err),
      idempotent: true,
      subject: body.id,
      trace: activeTrace(),
      expect: (answer) => typeof answer.id === 'string' && typeof answer.deliverAt === 'number',
    });
  }

  /**
   * At most MAX_BATCH messages in one request. Unlike the embedded queue, one the server's queue
   * refuses does not stop the others: the TickwheelHttpError's `body.results` has `{ id,
   * deliverAt }` or `{ error }` for each. Input the schema refuses schedules nothing.
   */
  async scheduleMany(
    messages: readonly ScheduleRequest<Payload>[],
    options: CallOptions = {},
  ): Promise<ScheduleResult[]> {
    checkBatch('scheduleMany', 'messages', messages);
    if (messages.length === 0) return [];
    const body = messages.map((message, i) => toBody(message, `messages[${i}]: `));
    const answer = await this.call<BatchResponse>(options, {
      method: 'POST',
      path: '/v1/messages:batch',
      body: { messages: body },
      refuse: (err) => {
        const at = body.findIndex((wire) => !sendable(wire));
        return at < 0
          ? refuseOption('messages', err)
          : refuseMessage(messages[at], `messages[${at}]: `, err);
      },
      idempotent: true,
      subject: body.map((wire) => wire.id as string),
      trace: activeTrace(),
      expect: (answer) => listOf(answer.results, messages.length),
    });
    return answer.results;
  }

  async cancel(id: string, options: CallOptions = {}): Promise<boolean> {
    const path = `/v1/messages${segment(id, 'id')}`;
    const exchange: Exchange = {
      method: 'DELETE',
      path,
      idempotent: true,
      expect: says('cancelled'),
    };
    return (await this.unless([404], options, exchange, true)) !== undefined;
  }

  async reschedule(id: string, when: NewDueTime, options: CallOptions = {}): Promise<boolean> {
    return (await this.rescheduleTo(id, when, options)) !== undefined;
  }

  async rescheduleTo(
    id: string,
    when: NewDueTime,
    options: CallOptions = {},
  ): Promise<number | undefined> {
    checkDueTime(when);
    const exchange: Exchange = {
      method: 'PATCH',
      path: `/v1/messages${segment(id, 'id')}`,
      body: when,
      refuse: (err) => refuseDelay(when, 'when', err),
      idempotent: when?.delayMs === undefined,
      expect: (answer) => typeof answer.deliverAt === 'number',
    };
    return (await this.unless<RescheduleResponse>([404, 409], options, exchange, true))?.deliverAt;
  }

  async get(id: string, options: CallOptions = {}): Promise<MessageInfo | undefined> {
    const path = `/v1/messages${segment(id, 'id')}`;
    const exchange: Exchange = { method: 'GET', path, idempotent: true, expect: isMessageInfo };
    return this.unless<WireMessageInfo>([404], options, exchange);
  }

  async receive(
    topic: string,
    receiveOptions: ReceiveOptions = {},
    options: CallOptions = {},
  ): Promise<ReceivedMessage<Payload>[]> {
    // Refused here as the embedded queue refuses them (NaN would go as null); a server waits at
    // most its maxWaitMs.
    checkReceiveOptions(receiveOptions, { maxWaitMs: MAX_WAIT_MS, visibilityMs: 1 });
    const waitMs = typeof receiveOptions.waitMs === 'number' ? receiveOptions.waitMs : 0;
    const timeoutMs = (callTimeout(options) ?? this.transportOptions.timeoutMs) + waitMs;
    const answer = await this.call<ReceiveResponse>(
      { ...options, timeoutMs: Math.min(timeoutMs, MAX_TIMEOUT_MS) },
      {
        method: 'POST',
        path: `/v1/topics${segment(topic, 'topic')}/receive`,
        body: receiveOptions,
        refuse: (err) => refuseOption('receive options', err),
        idempotent: false,
        expect: (answer) => Array.isArray(answer.messages),
      },
    );
    return answer.messages.map(fromWire) as ReceivedMessage<Payload>[];
  }

  async ack(receipt: string, options: AckCallOptions = {}): Promise<boolean> {
    const [acked] = await this.ackMany([receipt], options);
    return acked === true;
  }

  async ackMany(receipts: readonly string[], options: AckCallOptions = {}): Promise<boolean[]> {
    const durable = options.durable;
    if (durable !== undefined) checkFlag(durable, 'durable');
    // Sent as JSON, which leaves out the options that are undefined.
    return this.settleMany('ackMany', receipts, { durable }, options);
  }

  async nack(
    receipt: string,
    nackOptions: NackOptions = {},
    options: CallOptions = {},
  ): Promise<boolean> {
    const [nacked] = await this.nackMany([receipt], nackOptions, options);
    return nacked === true;
  }

  async nackMany(
    receipts: readonly string[],
    nackOptions: NackOptions = {},
    options: CallOptions = {},
  ): Promise<boolean[]> {
    const { delayMs, reason, durable } = checkOptionsObject(
      nackOptions,
      'nackMany options',
      '{ delayMs: 5000 }',
    );
    if (delayMs !== undefined) checkOption(delayMs, 'delayMs', 0, MAX_NACK_DELAY_MS);
    if (durable !== undefined) checkFlag(durable, 'durable');
    if (reason !== undefined && typeof reason !== 'string') {
      throw invalidOption(`reason must be a string, got ${describe(reason)}`);
    }
    return this.settleMany('nackMany', receipts, { delayMs, reason, durable }, options);
  }

  /** The embedded consume()'s Worker (src/queue/worker.ts), over HTTP. */
  consume(
    topic: string,
    handler: MessageHandler<Payload>,
    consumeOptions: ClientConsumeOptions = {},
  ): Consumer {
    checkCallback(handler, 'handler');
    const path = `/v1/topics${segment(topic, 'topic')}/stream`;
    const settings = checkConsumeOptions(consumeOptions);
    const source = consumerSource(
      {
        openStream: (body, signal) => openStream(this.transportOptions, path, signal, body),
        ackMany: (receipts) => this.ackMany(receipts),
        nack: (receipt, reason) => this.nack(receipt, { reason }),
      },
      topic,
      settings,
    );
    const worker = new Worker(source, topic, handler as MessageHandler, settings);
    const tracked: Consumer = {
      close: async () => {
        this.consumers.delete(tracked);
        await worker.close();
      },
    };
    this.consumers.add(tracked);
    return tracked;
  }

  /** A page of a topic's pending messages, like the embedded list(); bad options send nothing. */
  async list(listOptions: ListOptions, options: CallOptions = {}): Promise<ListPage> {
    return this.read<ListResponse>(listPath(listOptions), options, isMessagePage);
  }

  /**
   * Every message list() finds, page after page from `listOptions.cursor` (or the start); a
   * page's request is made once the previous page is used up, so breaking out stops them.
   */
  listAll(
    listOptions: ListOptions,
    options: CallOptions = {},
  ): AsyncGenerator<MessageInfo, void, undefined> {
    // Bad options throw at the call, not at the first next() of the iterator.
    listPath(listOptions);
    return this.pages(listOptions, options);
  }

  private async *pages(listOptions: ListOptions, options: CallOptions) {
    let cursor = listOptions.cursor;
    do {
      const page = await this.list({ ...listOptions, cursor }, options);
      yield* page.messages;
      cursor = page.cursor;
    } while (cursor !== undefined);
  }

  async deadLetters(topic: string, limit = 100, options: CallOptions = {}): Promise<MessageInfo[]> {
    const limitText = encodeURIComponent(String(limit));
    const path = `/v1/topics${segment(topic, 'topic')}/dead?limit=${limitText}`;
    return (await this.read<DeadLettersResponse>(path, options, isMessagePage)).messages;
  }

  async requeue(
    id: string,
    requeueOptions: { delayMs?: number } = {},
    options: CallOptions = {},
  ): Promise<boolean> {
    checkDueTime(requeueOptions);
    const exchange: Exchange = {
      method: 'POST',
      path: `/v1/messages${segment(id, 'id')}/requeue`,
      body: requeueOptions,
      refuse: (err) => refuseDelay(requeueOptions, 'requeue options', err),
      idempotent: false,
      expect: says('requeued'),
    };
    return (await this.unless([404, 409], options, exchange, true)) !== undefined;
  }

  /** Stops deliveries of a topic until resumed (durable); schedules are still accepted. */
  pause(topic: string, options: CallOptions = {}): Promise<WireTopic> {
    return this.topicCall('POST', topic, '/pause', {}, options);
  }

  /** Delivers a paused topic's messages again. */
  resume(topic: string, options: CallOptions = {}): Promise<WireTopic> {
    return this.topicCall('POST', topic, '/resume', {}, options);
  }

  /** Changes a topic's settings (null removes one); resolves with the topic once durable. */
  configureTopic(
    topic: string,
    update: TopicUpdateBody,
    options: CallOptions = {},
  ): Promise<WireTopic> {
    return this.topicCall('PATCH', topic, '', update, options);
  }

  /** A topic's settings and counts. */
  topicInfo(topic: string, options: CallOptions = {}): Promise<WireTopic> {
    return this.topicCall('GET', topic, '', undefined, options);
  }

  /**
   * A page of the topics with messages or settings other than the defaults, by name: pass
   * `cursor` back for the next (absent on the last).
   */
  async topicList(options: TopicListOptions & CallOptions = {}): Promise<TopicListResponse> {
    const { limit, cursor, ...call } = options;
    const page = { limit, cursor };
    checkTopicListOptions(page);
    return this.read('/v1/topics' + queryOf(page), call, isTopicList);
  }

  /** A call on one topic; each sets or reads a state, so repeating it is safe. */
  private async topicCall(
    method: 'GET' | 'POST' | 'PATCH',
    topic: string,
    suffix: string,
    body: unknown,
    options: CallOptions,
  ): Promise<WireTopic> {
    return this.call(options, {
      method,
      path: `/v1/topics${segment(topic, 'topic')}${suffix}`,
      body,
      refuse: (err) => refuseOption('the topic update', err),
      idempotent: true,
      expect: isTopic,
    });
  }

  /** Creates or replaces a recurring schedule (PUT /v1/schedules/:name); resolves once durable. */
  async putSchedule(
    name: string,
    spec: ScheduleBodyRecurring,
    options: CallOptions = {},
  ): Promise<WireSchedule> {
    return this.call(options, {
      method: 'PUT',
      path: `/v1/schedules${segment(name, 'name')}`,
      body: spec,
      refuse: (err) => refuseOption('the schedule', err),
      idempotent: true,
      expect: isSchedule,
    });
  }

  /** Changes some fields of a schedule; undefined if there is none by that name. */
  async updateSchedule(
    name: string,
    patch: Partial<ScheduleBodyRecurring>,
    options: CallOptions = {},
  ): Promise<WireSchedule | undefined> {
    return this.unless<WireSchedule>([404], options, {
      method: 'PATCH',
      path: `/v1/schedules${segment(name, 'name')}`,
      body: patch,
      refuse: (err) => refuseOption('the schedule update', err),
      idempotent: true,
      expect: isSchedule,
    });
  }

  async getSchedule(name: string, options: CallOptions = {}): Promise<WireSchedule | undefined> {
    const path = `/v1/schedules${segment(name, 'name')}`;
    const exchange: Exchange = { method: 'GET', path, idempotent: true, expect: isSchedule };
    return this.unless<WireSchedule>([404], options, exchange);
  }

  async listSchedules(options: CallOptions = {}): Promise<WireSchedule[]> {
    const answer = await this.read<ScheduleListResponse>('/v1/schedules', options, isScheduleList);
    return answer.schedules;
  }

  /** Deletes a schedule; false if there is none by that name. */
  async deleteSchedule(name: string, options: CallOptions = {}): Promise<boolean> {
    const path = `/v1/schedules${segment(name, 'name')}`;
    const exchange: Exchange = {
      method: 'DELETE',
      path,
      idempotent: true,
      expect: says('deleted'),
    };
    return (await this.unless([404], options, exchange)) !== undefined;
  }

  /**
   * Message events as they happen (GET /v1/events), as an async iterator. Ends when `signal`
   * aborts or the server closes the stream; throws ERR_TICKWHEEL_EVENTS_LOST if this reader fell
   * too far behind, ERR_TICKWHEEL_TIMEOUT after `idleTimeoutMs` (default 45 s) of silence.
   */
  events(options: ClientWatchOptions = {}): AsyncGenerator<QueueEvent, void, undefined> {
    checkWatch(options);
    const idleMs = checkIdleTimeout(options.idleTimeoutMs);
    return streamEvents(this.transportOptions, options, idleMs, this.streams);
  }

  /** GET /v1/stats: the server queue's stats() (a QueueStats), its recovery and the server's figures. */
  async stats(options: StatsOptions & CallOptions = {}): Promise<StatsResponse> {
    const { topics, ...call } = options;
    checkStatsOptions({ topics });
    return this.read('/v1/stats' + queryOf({ topics }), call, isStats);
  }

  /** GET /healthz: resolves when the server is up and not shutting down. */
  async health(options: CallOptions = {}): Promise<HealthResponse> {
    return this.read('/healthz', options, isHealth);
  }

  /** POST /v1/ack or /v1/nack, for the receipts worth sending (sendableReceipts). */
  private async settleMany(
    method: 'ackMany' | 'nackMany',
    receipts: readonly string[],
    extra: NackOptions,
    options: CallOptions,
  ): Promise<boolean[]> {
    const sent = sendableReceipts(method, receipts);
    const results = new Array<boolean>(receipts.length).fill(false);
    if (sent.length === 0) return results;
    const answer = await this.call<AckResponse | NackResponse>(options, {
      method: 'POST',
      path: method === 'ackMany' ? '/v1/ack' : '/v1/nack',
      body: { receipts: sent.map((i) => receipts[i]), ...extra },
      idempotent: false,
      expect: (answer) => listOf(answer.results, sent.length),
    });
    sent.forEach((at, i) => (results[at] = answer.results[i] === true));
    return results;
  }

  /** Stops every consumer this client started, waiting for their handlers and acks. */
  async close(): Promise<void> {
    for (const stream of this.streams) stream.abort();
    await Promise.all([...this.consumers].map((consumer) => consumer.close()));
  }

  private async call<T>(options: CallOptions, exchange: Exchange): Promise<T> {
    const timeoutMs = callTimeout(options);
    return this.transport.send<T>({ ...exchange, signal: options.signal, timeoutMs });
  }

  private read<T>(path: string, options: CallOptions, expect: Exchange['expect']): Promise<T> {
    return this.call(options, { method: 'GET', path, idempotent: true, expect });
  }

  /**
   * What cancel(), rescheduleTo() and requeue() make of the server's refusal (404 or 409, whose
   * message says why): undefined, so they answer false or undefined as the embedded queue does.
   */
  protected refused(_refusal: TickwheelHttpError): undefined {
    return undefined;
  }

  /**
   * The answer's body, or undefined when the server answers with one of `statuses` (what
   * refused() makes of it for a `change`). Only a tickwheel server's refusal counts: a 404 page
   * of something else on that URL is thrown (ERR_TICKWHEEL_HTTP), not taken for "no such id".
   */
  private async unless<T = unknown>(
    statuses: number[],
    options: CallOptions,
    exchange: Exchange,
    change = false,
  ): Promise<T | undefined> {
    try {
      return await this.call<T>(options, exchange);
    } catch (err) {
      const ours = err instanceof TickwheelHttpError && err.code !== 'ERR_TICKWHEEL_HTTP';
      if (!(ours && statuses.includes(err.status))) throw err;
      return change ? this.refused(err) : undefined;
    }
  }
}

/** The path of one page of list(), its options checked as the embedded queue checks them. */
function listPath(options: ListOptions): string {
  checkListOptions(options);
  const { from, until, limit, cursor } = options;
  return `/v1/topics${segment(options.topic, 'topic')}/messages${queryOf({ from, until, limit, cursor })}`;
}

/** `?name=value&...` of the values given, or '' for none. */
function queryOf(values: Record<string, string | number | undefined>): string {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(values)) {
    if (value !== undefined) query.set(key, String(value));
  }
  const text = query.toString();
  return text === '' ? '' : `?${text}`;
}
