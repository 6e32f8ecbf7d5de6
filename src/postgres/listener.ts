/**
 * The node's one LISTEN connection for a queue's channel (payloads "<partition> <event>"), made
 * on the first subscribe(), outside the pool: a pooler in transaction mode would break LISTEN.
 * When it drops it connects again by itself, from 100 ms up to 5 s apart, and listens again;
 * notifications sent meanwhile are lost, so every partition then hears `n` and `i` (look at the
 * near segments and the deliveries in flight). While it is connected, PostgreSQL loses none.
 */

import { setTimeout as delay } from 'node:timers/promises';

import { named, type PgListenClient } from './pg.js';

const RETRY_FIRST_MS = 100;
/** What a failure of the notification connection is told as (its errors go to onError named). */
const LISTENING = 'the LISTEN connection (notifications; it reconnects by itself)';
const RETRY_MOST_MS = 5_000;

type Listener = (event: string) => void;

export class ChannelListener {
  private readonly listeners = new Map<number, Set<Listener>>();
  private client: PgListenClient | undefined;
  private connecting: Promise<void> | undefined;
  private closed = false;
  /** Connections made, the first included: a test reads it to see a reconnect. */
  connections = 0;

  constructor(
    private readonly makeClient: () => Promise<PgListenClient>,
    private readonly channel: string,
    private readonly onError: (err: Error) => void,
  ) {}

  async subscribe(partition: number, listener: Listener): Promise<() => Promise<void>> {
    let set = this.listeners.get(partition);
    if (set === undefined) this.listeners.set(partition, (set = new Set()));
    set.add(listener);
    try {
      await this.connected();
    } catch (err) {
      set.delete(listener);
      throw err;
    }
    return async () => {
      set.delete(listener);
      if (set.size === 0 && this.listeners.get(partition) === set) this.listeners.delete(partition);
    };
  }

  /** The LISTEN connection, once it listens. */
  private connected(): Promise<void> {
    if (this.client !== undefined) return Promise.resolve();
    this.connecting ??= this.connect().finally(() => (this.connecting = undefined));
    return this.connecting;
  }

  private async connect(): Promise<void> {
    const client = await this.makeClient();
    let gone = false;
    const lost = (err?: Error) => {
      if (gone) return;
      gone = true;
      if (this.client === client) this.client = undefined;
      client.end().catch(() => undefined);
      if (err !== undefined && !this.closed) this.onError(named(err, LISTENING));
      if (!this.closed) void this.reconnect();
    };
    client.on('error', lost);
    client.on('end', () => lost());
    client.on('notification', (m) => {
      if (m.channel === this.channel && m.payload !== undefined) this.dispatch(m.payload);
    });
    try {
      await client.connect();
      await client.query(`LISTEN "${this.channel.replace(/"/g, '""')}"`);
    } catch (err) {
      gone = true;
      await client.end().catch(() => undefined);
      throw err;
    }
    this.connections++;
    if (this.closed) {
      gone = true;
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    if (this.connections > 1) {
      for (const partition of this.listeners.keys()) {
        this.dispatch(`${partition} n`);
        this.dispatch(`${partition} i`);
      }
    }
  }

  private async reconnect(): Promise<void> {
    let wait = RETRY_FIRST_MS;
    while (!this.closed && this.client === undefined) {
      await delay(wait);
      try {
        await this.connected();
      } catch (err) {
        this.onError(named(err, LISTENING));
        wait = Math.min(RETRY_MOST_MS, wait * 2);
      }
    }
  }

  /** Tells this node's listeners of `partition` an event, as if it had come over the channel. */
  tell(partition: number, event: string): void {
    this.dispatch(`${partition} ${event}`);
  }

  private dispatch(payload: string): void {
    const space = payload.indexOf(' ');
    const set = this.listeners.get(Number(payload.slice(0, space)));
    if (space < 0 || set === undefined) return;
    const event = payload.slice(space + 1);
    for (const listener of set) listener(event);
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.connecting?.catch(() => undefined);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }
}
