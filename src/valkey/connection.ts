/**
 * The way to Valkey/Redis for the cluster and the Redis idempotency store: one node-redis client
 * (standalone, Cluster or through Sentinel; which is asked of the server, not configured) behind
 * a few calls routed by their key's slot, and a Functions library loaded on every primary.
 */

import {
  RESP_TYPES,
  createClient,
  createCluster,
  createSentinel,
  type RedisClientType as Client,
  type RedisClusterType as Cluster,
  type RedisSentinelType as Sentinel,
} from '@redis/client';
import { assert } from '../assert.js';
import { TickwheelStateError } from '../errors.js';
import { hidePassword, invalidOption } from '../validate.js';
import { slotOf } from './slot.js';
import { checkRedisUrls, parseSentinelUrl } from './urls.js';
import {
  NO_FUNCTION,
  REFUSALS,
  OOM,
  isConnectionError,
  isUnreachable,
  misconfigured,
  unavailable,
  destroyQuietly,
  within,
  withinMs,
} from './reach.js';

type Send = (args: string[], options: object) => Promise<unknown>;
type ReplicaState = { at: number; count: number; noneSince: number | undefined };

const BUFFERS = { [RESP_TYPES.BLOB_STRING]: Buffer, [RESP_TYPES.SIMPLE_STRING]: Buffer } as const;
const BUFFERED = { typeMapping: BUFFERS };

/** A Redis Functions library that a connection loads on every primary. */
export interface FunctionLibrary {
  readonly name: string;
  readonly version: number;
  /** A read-only function of the library, without keys, that answers its version. */
  readonly versionFunction: string;
  source(): string;
  /** A server's message about the library, each line of the source it names made clearer. */
  where(message: string): string;
}

interface Connections {
  client?: Client;
  cluster?: Cluster;
  sentinel?: Sentinel;
  urls: readonly string[];
}

/** How long calls refused during a failover are retried, by default. */
const RETRY_BUDGET_MS = 10_000;
/** How long one call may take by default, waiting for a reconnect included. */
const COMMAND_TIMEOUT_MS = 10_000;

export class Valkey {
  private subscriber: Promise<Client> | undefined;
  private subscriberClient: Client | undefined;
  private reloading: Promise<void> | undefined;
  /** The library loadLibrary() loads, and loads again on a server found without it. */
  protected readonly library: FunctionLibrary | undefined = undefined;
  private readonly client: Client | undefined;
  private readonly cluster: Cluster | undefined;
  private readonly sentinel: Sentinel | undefined;

  retryBudgetMs = RETRY_BUDGET_MS;
  commandTimeoutMs = COMMAND_TIMEOUT_MS;
  private readonly urls: readonly string[];
  /** Per primary: when ROLE was last asked, its replicas, and since when it has had none. */
  private readonly replicaCounts = new Map<string, ReplicaState>();
  /** See pin(). */
  private pinned = false;
  /** The last maxmemory refusal (OOM) and when it came (Date.now()); see writesRefused(). */
  private oom: { at: number; error: Error } | undefined;

  /**
   * Made by connect(). Typed `object` so that this module's declarations name no type of
   * @redis/client, an optional peer dependency: an install without it must still type-check.
   */
  constructor(connections: object) {
    ({
      client: this.client,
      cluster: this.cluster,
      sentinel: this.sentinel,
      urls: this.urls,
    } = connections as Connections);
  }

  /** Connects to a standalone server, a Cluster through any node, or Sentinel's primary. */
  static async connect<V extends Valkey>(
    this: new (connections: object) => V,
    urls: string | readonly string[],
    connectTimeoutMs = 10_000,
  ): Promise<V> {
    const list = checkRedisUrls(urls);
    const deadline = Date.now() + connectTimeoutMs;
    const viaSentinel = parseSentinelUrl(list[0]);
    let made: Omit<Connections, 'urls'>;
    if (viaSentinel !== undefined) {
      if (list.length > 1) {
        throw invalidOption(
          'a redis+sentinel:// URL names every Sentinel itself (host:port,host:port); give it alone',
        );
      }
      // The credentials are the data nodes' (parseSentinelUrl gives only those in the URL).
      const { name, sentinels, ...credentials } = viaSentinel;
      made = {
        sentinel: createSentinel({
          name,
          sentinelRootNodes: sentinels,
          // One connection to the primary, so that a WAIT follows the writes it waits for.
          masterPoolSize: 1,
          ...(Object.keys(credentials).length === 0 ? {} : { nodeClientOptions: credentials }),
        }),
      };
    } else {
      const { url, clustered } = await reachable(list, deadline);
      made = clustered
        ? { cluster: createCluster({ rootNodes: list.map((root) => ({ url: root })) }) as Cluster }
        : { client: createClient({ url }) as Client };
    }
    const connection = (made.sentinel ?? made.cluster ?? made.client) as Client;
    connection.on('error', () => {});
    try {
      await withinMs(connection.connect(), Math.max(0, deadline - Date.now()), () =>
        unavailable(list, new Error('connecting took too long')),
      );
    } catch (err) {
      destroyQuietly(connection);
      throw err;
    }
    return new this({ ...made, urls: list });
  }

  /** Bounds every call by `ms` too (a node that opens: what is left of its connect timeout). */
  limitCalls(ms: number | undefined): void {
    this.commandTimeoutMs = Math.min(COMMAND_TIMEOUT_MS, ms ?? Infinity);
    this.retryBudgetMs = Math.min(RETRY_BUDGET_MS, ms ?? Infinity);
  }

  /** FCALL `name` with one key; with `buffers`, every string of the reply is a Buffer. */
  fcall(name: string, key: string, args: ReadonlyArray<string | number | Buffer>, buffers = false) {
    const strings = args.map((a) => (Buffer.isBuffer(a) ? a : String(a)));
    return this.send(key, ['FCALL', name, '1', key, ...strings], buffers ? BUFFERED : undefined);
  }

  private send(
    key: string,
    command: Array<string | Buffer>,
    options?: { typeMapping: typeof BUFFERS },
    readonly = false,
  ): Promise<unknown> {
    // A server down for good must fail calls, not hold them (and their HTTP requests) for ever.
    const ms = this.commandTimeoutMs;
    const { cluster, sentinel, client } = this;
    return this.refusalsRetried(
      () => {
        if (cluster !== undefined && (this.pinned || ON_THE_PRIMARY.has(String(command[0])))) {
          return this.onPrimaryOf(cluster, key, command, ms, options);
        }
        // The bound covers finding the node's connection too, which can hang in a failover.
        if (cluster !== undefined) {
          return within(ms, (o) => cluster.sendCommand(key, readonly, command, o), options);
        }
        // Sentinel: always the primary (replicas may lag behind what this node just wrote).
        if (sentinel !== undefined) {
          return within(ms, (o) => sentinel.sendCommand(false, command, o), options);
        }
        return within(ms, (o) => (client as Client).sendCommand(command, o), options);
      },
      command[0] === 'WAIT' || command[0] === 'WAITAOF',
    );
  }

  /**
   * A command for the primary that serves `key`, on the connection of that key's writes. The
   * Cluster client would route WAIT and WAITAOF to every primary (their tips) and answer the
   * least count, and ROLE to any node.
   */
  private async onPrimaryOf(
    cluster: Cluster,
    key: string,
    command: Array<string | Buffer>,
    ms: number,
    options?: { typeMapping: typeof BUFFERS },
  ): Promise<unknown> {
    const master = masterOf(cluster, key);
    if (master === undefined) {
      const error = new Error(`no primary serves slot ${slotOf(key)} now`);
      error.name = 'ConnectionError';
      throw error;
    }
    const nodes = cluster as unknown as { nodeClient(node: unknown): Promise<Client> | Client };
    const client = await withinMs(Promise.resolve(nodes.nodeClient(master)), ms);
    try {
      return await within(ms, (o) => client.sendCommand(command, o), options);
    } catch (err) {
      // The slot moved: not run. A keyed read through the Cluster client refreshes the slot map.
      if (/^(MOVED|ASK)\b/.test(err instanceof Error ? err.message : '')) {
        await within(ms, (o) => cluster.sendCommand(key, false, ['EXISTS', key], o)).catch(
          () => {},
        );
      }
      throw err;
    }
  }

  /** Which server takes the writes of `key` now: writes with the same answer share a wait. */
  primaryOf(key: string): string {
    if (this.cluster === undefined) return 'primary';
    return masterOf(this.cluster, key)?.address ?? `slot ${slotOf(key)}`;
  }

  /**
   * Sends every command to its key's primary itself, as the durability waits are, so a write
   * and the WAIT after it share one connection (a redirected write is refused, then retried).
   * For the producer's connection.
   */
  pin(): this {
    this.pinned = true;
    return this;
  }

  /**
   * The replicas of the primary that serves `key` (ROLE), and how long it has been seen with
   * none (0 with one), asked at most once a second per primary: a wait on a primary without one
   * would block the connection for its whole timeout.
   */
  async replicas(key: string): Promise<{ count: number; noneForMs: number }> {
    const now = Date.now();
    const primary = this.primaryOf(key);
    let state = this.replicaCounts.get(primary);
    if (state === undefined || now - state.at >= 1_000) {
      const role = (await this.send(key, ['ROLE'])) as unknown[];
      const count = role[0] === 'master' && Array.isArray(role[2]) ? role[2].length : 0;
      state = { at: now, count, noneSince: count > 0 ? undefined : (state?.noneSince ?? now) };
      this.replicaCounts.set(primary, state);
    }
    const { count, noneSince } = state;
    return { count, noneForMs: noneSince === undefined ? 0 : Date.now() - noneSince };
  }

  command(key: string, args: readonly string[], readonly = false): Promise<unknown> {
    return this.send(key, [...args], undefined, readonly);
  }

  /** The fields of the hash at `key` (HGETALL); none when there is no such key. */
  async hash(key: string): Promise<Record<string, string>> {
    return ((await this.send(key, ['HGETALL', key])) ?? {}) as Record<string, string>;
  }

  /**
   * Runs `call`, and again while the server refuses it for a moment (REFUSALS: a failover), up
   * to `retryBudgetMs`: a refused command was not run, so repeating it is safe. A WAIT is never
   * repeated (on another primary it would count other replicas). A lost connection (outcome
   * unknown) is not retried; it and refusals past the budget reject ERR_TICKWHEEL_UNAVAILABLE.
   */
  private async refusalsRetried(call: () => Promise<unknown>, once: boolean): Promise<unknown> {
    const until = Date.now() + this.retryBudgetMs;
    let reloaded = false;
    for (let pause = 50; ; pause = Math.min(pause * 2, 500)) {
      try {
        return await call();
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        // The server lost the library (restarted empty, or a promoted replica never had it).
        if (!reloaded && this.library !== undefined && NO_FUNCTION.test(message)) {
          reloaded = true;
          await (this.reloading ??= this.loadLibrary().finally(() => (this.reloading = undefined)));
          continue;
        }
        const refused = REFUSALS.test(message);
        if (refused && OOM.test(message)) this.oom = { at: Date.now(), error: err as Error };
        if (refused && !once && Date.now() + pause < until) {
          await new Promise((resolve) => setTimeout(resolve, pause));
          continue;
        }
        // Replies of functions (errors a function raised on purpose) pass as they are.
        if (refused || isConnectionError(err)) {
          const error = unavailable(this.urls, err);
          // A lost connection may have run it; a refused WAIT says nothing of the write.
          if (refused && !once) error.outcome = 'none';
          throw error;
        }
        throw err;
      }
    }
  }

  /**
   * Why writes fail now when the server refused one for its maxmemory within `freshMs`, else
   * undefined. The node's own lease renewals are writes, so a server that stays full keeps this
   * fresh, and it clears by itself once memory is given back.
   */
  writesRefused(freshMs: number): string | undefined {
    if (this.oom === undefined || Date.now() - this.oom.at > freshMs) return undefined;
    return unavailable(this.urls, this.oom.error).message;
  }

  /** Loads the library on every primary, refusing where one runs a newer library. */
  async loadLibrary(): Promise<void> {
    const library = this.library;
    assert(library !== undefined, 'loadLibrary() on a connection that has no functions library');
    for (const primary of await this.primaries()) {
      let running = 0;
      try {
        running = Number(await primary.send(['FCALL_RO', library.versionFunction, '0']));
      } catch (err) {
        // No library yet; any other failure is not that (ours could replace a newer one).
        if (!NO_FUNCTION.test(err instanceof Error ? err.message : String(err))) throw err;
      }
      if (running > library.version) {
        throw new TickwheelStateError(
          'ERR_TICKWHEEL_FORMAT',
          `the ${library.name} functions on the server are version ${running}, newer than this ` +
            `tickwheel's ${library.version}: upgrade this node`,
        );
      }
      await primary
        .send(['FUNCTION', 'LOAD', 'REPLACE', library.source()])
        .catch((err: unknown) => {
          if (err instanceof Error) err.message = library.where(err.message);
          throw err;
        });
    }
  }

  /** Replicas connected to each primary now (INFO replication). */
  async replicasPerPrimary(): Promise<Array<{ primary: string; replicas: number }>> {
    const counts: Array<{ primary: string; replicas: number }> = [];
    for (const { name, send } of await this.primaries()) {
      const info = String(await send(['INFO', 'replication']));
      const connected = /^connected_slaves:(\d+)/m.exec(info);
      counts.push({ primary: name, replicas: connected === null ? 0 : Number(connected[1]) });
    }
    return counts;
  }

  /**
   * Listens on a sharded channel (SSUBSCRIBE: in its slot, like a partition's keys); standalone,
   * on a second connection. Resolves to the call that stops listening.
   */
  async subscribe(channel: string, listener: (message: string) => void) {
    const listen = async () => {
      // A Cluster's and Sentinel's subscriptions have their own connections, moved in a failover.
      const on = (this.cluster ?? this.sentinel ?? (await this.standaloneSubscriber())) as Client;
      await on.sSubscribe(channel, listener);
      return async () => {
        await on.sUnsubscribe(channel, listener);
      };
    };
    try {
      return await withinMs(listen(), this.commandTimeoutMs);
    } catch (err) {
      throw isConnectionError(err) ? unavailable(this.urls, err) : err;
    }
  }

  /**
   * The second connection a standalone server's subscriptions need, made on first use. One not
   * connected within commandTimeoutMs (node-redis retries a refused connection for ever) is
   * dropped, so that the next subscribe() makes a new one rather than wait on it again.
   */
  private standaloneSubscriber(): Promise<Client> {
    if (this.subscriber !== undefined) return this.subscriber;
    const subscriber = (this.client as Client).duplicate();
    subscriber.on('error', () => {});
    this.subscriberClient = subscriber;
    this.subscriber = withinMs(subscriber.connect(), this.commandTimeoutMs).then(
      () => subscriber as Client,
      (err: unknown) => {
        if (this.subscriberClient === subscriber) this.dropSubscriber();
        throw err;
      },
    );
    return this.subscriber;
  }

  private dropSubscriber(): void {
    destroyQuietly(this.subscriberClient);
    this.subscriber = undefined;
    this.subscriberClient = undefined;
  }

  /** Drops every connection at once, failing what is in flight: for a node that could not open. */
  destroy(): void {
    for (const connection of [this.subscriberClient, this.client, this.cluster, this.sentinel]) {
      destroyQuietly(connection);
    }
  }

  async close(): Promise<void> {
    // The main connection closes whatever became of the subscriber (refused, still connecting).
    const subscriber = this.subscriberClient;
    if (subscriber?.isReady === true) await subscriber.close().catch(() => this.dropSubscriber());
    else this.dropSubscriber();
    await ((this.cluster ?? this.sentinel ?? this.client) as Client).close();
  }

  /** Every primary, with a bounded call on it that fails ERR_TICKWHEEL_UNAVAILABLE. */
  private async primaries() {
    const ms = this.commandTimeoutMs;
    const bounded = (name: string, sendCommand: Send) => ({
      name,
      send: async (args: string[]) => {
        try {
          return await within(ms, (o) => sendCommand(args, o));
        } catch (err) {
          throw isUnreachable(err) ? unavailable(this.urls, err) : err;
        }
      },
    });
    const shown = hidePassword(this.urls[0] ?? '');
    const { cluster, sentinel, client } = this;
    if (sentinel !== undefined) {
      const toPrimary: Send = (args, o) => sentinel.sendCommand(false, args, o);
      return [bounded(`the primary of ${shown}`, toPrimary)];
    }
    if (cluster === undefined) return [bounded(shown, (args, o) => client!.sendCommand(args, o))];
    const found = [];
    for (const master of cluster.masters) {
      const node = await withinMs(Promise.resolve(cluster.nodeClient(master)), ms).catch(
        (err: unknown) => {
          throw unavailable(this.urls, err);
        },
      );
      found.push(bounded(master.address, (args, o) => (node as Client).sendCommand(args, o)));
    }
    return found;
  }
}

/**
 * The first of `urls` that answers, and whether it is a Cluster node, tried round after round
 * until `deadline`. Each try gives up at its first failure (node-redis would retry one URL for
 * ever), so one dead root node does not stop a node from starting.
 */
async function reachable(urls: readonly string[], deadline: number) {
  let last: unknown;
  for (;;) {
    for (const url of urls) {
      const left = Math.max(100, deadline - Date.now());
      const probe = createClient({
        url,
        socket: { reconnectStrategy: false, connectTimeout: Math.min(left, 2_000) },
      }) as Client;
      probe.on('error', () => {});
      try {
        // Bounded as a whole: a stalled server holds the handshake past connectTimeout.
        const info = await withinMs(
          probe.connect().then(() => probe.sendCommand(['INFO', 'cluster'])),
          Math.min(left, 2_000),
        );
        await probe.close();
        return { url, clustered: /cluster_enabled:1/.test(String(info)) };
      } catch (err) {
        destroyQuietly(probe);
        // Refused for a reason waiting does not cure (a wrong password): told at once.
        if (misconfigured(err) !== undefined) throw err;
        last = err;
      }
    }
    if (Date.now() >= deadline) throw unavailable(urls, last);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** node-redis's node for the primary of `key`'s slot in its current slot map. */
function masterOf(cluster: Cluster, key: string): { address?: string } | undefined {
  const { slots } = cluster as unknown as {
    slots: Array<{ master?: { address?: string } } | undefined>;
  };
  return slots[slotOf(key)]?.master;
}

/** Commands about one server, which must go to the primary of the key's slot itself. */
const ON_THE_PRIMARY = new Set(['WAIT', 'WAITAOF', 'ROLE']);
