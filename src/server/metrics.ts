/**
 * /metrics in Prometheus text format: request series observed as they happen, and series read
 * from the queue's stats() at scrape time (lateness is the queue's own, on its clock). Topic
 * labels are bounded: the `topics` largest topics are named, and of those, the first `topics`
 * seen keep a label of their own; the rest are summed under topic="_other".
 */

import {
  Counter,
  Gauge,
  Histogram,
  Registry,
  collectDefaultMetrics,
  type Metric,
} from 'prom-client';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type {
  ClusterStats,
  DeliveryLateness,
  FireLateness,
  QueueCounters,
  QueueStats,
} from '../protocol/model.js';

/** The queue's counters (stats()) exposed as tickwheel_messages_<name>_total. */
const QUEUE_COUNTERS: ReadonlyArray<[key: keyof QueueCounters, help: string]> = [
  ['scheduled', 'Messages scheduled (deduplicated ones not counted).'],
  ['deduplicated', 'Schedules that matched a pending message with the same id.'],
  ['fired', 'Messages that came due and became ready.'],
  ['delivered', 'Deliveries to consumers (redeliveries included).'],
  ['acked', 'Messages acknowledged.'],
  ['nacked', 'Deliveries given back with nack.'],
  ['expired', 'Deliveries whose visibility timeout ran out before an ack.'],
  ['dead', 'Messages moved to the dead letters after their last attempt.'],
  ['cancelled', 'Messages cancelled.'],
  ['rescheduled', 'Messages moved to a new due time.'],
];

const STATES = ['scheduled', 'ready', 'inflight', 'dead'] as const;

/** The `topic` label of the topics past the cap. */
const OTHER_TOPIC = '_other';

function numberOf(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) ? value : 0;
}

interface Sample {
  metricName?: string;
  labels: Record<string, string>;
  value: number;
}

/** A summary or histogram set whole at scrape time: prom-client's take one sample at a time. */
class ComputedMetric {
  samples: Sample[] = [];
  readonly aggregator = 'sum';
  constructor(
    readonly name: string,
    readonly help: string,
    readonly type: 'summary' | 'histogram',
  ) {}

  get(): { name: string; help: string; type: string; values: Sample[]; aggregator: string } {
    const { name, help, type, samples, aggregator } = this;
    return { name, help, type, values: samples, aggregator };
  }

  reset(): void {
    this.samples = [];
  }
}

/** A counter that mirrors a monotonic total read elsewhere. */
class MirroredCounter {
  private last = 0;
  constructor(readonly counter: Counter) {}

  update(total: number): void {
    if (total > this.last) this.counter.inc(total - this.last);
    this.last = Math.max(this.last, total);
  }
}

/**
 * Node's default metrics, less three gauges named like counters (`promtool check metrics` rejects
 * them), each the sum of the labelled gauge named without _total (nodejs_active_handles{type}).
 */
function defaultRegistry(): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  for (const kind of ['handles', 'requests', 'resources']) {
    registry.removeSingleMetric(`nodejs_active_${kind}_total`);
  }
  return registry;
}

export class ServerMetrics {
  readonly registry = defaultRegistry();
  /** Reads the number of open connections at scrape time; set by the server once listening. */
  openConnections: () => number = () => 0;
  /** The cluster's series, kept out of `registry` until stats() carry a cluster part. */
  private readonly cluster = new Registry();
  private readonly httpRequests = this.counter(
    'tickwheel_http_requests_total',
    'HTTP requests answered, by route pattern and status.',
    ['method', 'route', 'status'],
  );
  private readonly httpDuration = new Histogram({
    name: 'tickwheel_http_request_duration_seconds',
    help: 'Time from request to response, by route pattern (long polls included).',
    labelNames: ['method', 'route'],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30],
    registers: [this.registry],
  });
  private readonly connections: Gauge = new Gauge({
    name: 'tickwheel_http_connections',
    help: 'HTTP connections open (at most --max-connections).',
    registers: [this.registry],
    collect: () => this.connections.set(this.openConnections()),
  });
  private readonly connectionsClosedAtCap = this.counter(
    'tickwheel_http_connections_closed_at_cap_total',
    'Connections closed at the connection cap: shed (had not sent a whole request) or refused (all others were serving one).',
    ['action'],
  );
  private readonly deliveryLateness = this.computed(
    'tickwheel_delivery_lateness_seconds',
    'How long after its due time (or its schedule, if that was later) a message was handed to a consumer, first deliveries.',
    'histogram',
  );
  private readonly queueCounters = QUEUE_COUNTERS.map(
    ([key, help]) => [key, this.mirrored(`tickwheel_messages_${key}_total`, help)] as const,
  );
  private readonly messages = this.gauge(
    'tickwheel_messages',
    'Live messages by topic and state (scheduled counts those still on disk too).',
    ['topic', 'state'],
  );
  private readonly pushRequests = this.counter(
    'tickwheel_push_requests_total',
    'Push attempts by topic and outcome (succeeded: a 2xx answer; failed: anything else).',
    ['topic', 'outcome'],
  );
  private readonly pushInFlight = this.gauge(
    'tickwheel_push_in_flight',
    'Push requests under way, by topic.',
    ['topic'],
  );
  private readonly inMemory = this.gauge(
    'tickwheel_messages_in_memory',
    'Messages held in memory: due within the horizon, ready or in flight.',
  );
  private readonly storeLive = this.gauge(
    'tickwheel_store_live_messages',
    'Messages not yet finished (acked or cancelled), all topics, in memory or on disk.',
  );
  private readonly storeDead = this.gauge(
    'tickwheel_store_dead_messages',
    'Dead letters waiting to be requeued or cancelled.',
  );
  private readonly logBytes = this.gauge('tickwheel_store_log_bytes', 'Bytes in the message log.');
  private readonly fsyncs = this.mirrored('tickwheel_store_fsyncs_total', 'fsyncs of the log.');
  private readonly fsyncSeconds = this.mirrored(
    'tickwheel_store_fsync_seconds_total',
    'Time spent in fsync of the log; divide by tickwheel_store_fsyncs_total for the mean.',
  );
  private readonly failing = this.gauge(
    'tickwheel_store_failing',
    'Store work that fails now and is retried by itself, by part: load (bringing due messages into memory), index (schedule index writes), checkpoint; 1 while failing. GET /healthz says why.',
    ['part'],
  );
  private readonly stopped = this.gauge(
    'tickwheel_store_stopped',
    'The store stopped taking changes after a failed log write or fsync (1), until the queue is opened again; GET /healthz says why.',
  );
  private readonly fsyncMax = this.gauge(
    'tickwheel_store_fsync_max_seconds',
    'Longest fsync of the log since start.',
  );
  private readonly fireLateness = this.computed(
    'tickwheel_fire_lateness_seconds',
    'How late messages became ready after their due time (or their schedule, if that was later); quantiles over the last 4096.',
    'summary',
  );
  private readonly clusterNodes = this.gauge(
    'tickwheel_cluster_nodes',
    'Nodes of the queue on Valkey/Redis or PostgreSQL that heartbeat (absent on one machine).',
    [],
    [this.cluster],
  );
  private readonly clusterPartitions = this.gauge(
    'tickwheel_cluster_partitions',
    'Partitions whose lease each node holds ("(none)": no owner now).',
    ['node'],
    [this.cluster],
  );
  private readonly clusterOwned = this.gauge(
    'tickwheel_cluster_partitions_owned',
    'Partitions this node owns and fires messages for.',
    [],
    [this.cluster],
  );
  private readonly leaseChanges = this.mirrored(
    'tickwheel_cluster_lease_changes_total',
    'Partition leases this node took or lost.',
    [this.cluster],
  );
  private readonly dataLosses = this.mirrored(
    'tickwheel_cluster_data_losses_total',
    'Partitions this node saw made anew on the server: their data was lost.',
    [this.cluster],
  );
  /** The push totals last mirrored, by topic and outcome. */
  private readonly pushSeen = new Map<string, number>();
  private clusterRegistered = false;
  /** Topics with a label of their own, in the order first seen; at most `topics`. */
  private readonly labelled = new Set<string>();

  /** `topics`: the most topics with a label of their own. */
  constructor(readonly topics = 100) {}

  private gauge<L extends string = never>(
    name: string,
    help: string,
    labelNames: L[] = [],
    registers = [this.registry],
  ): Gauge<L> {
    return new Gauge<L>({ name, help, labelNames, registers });
  }

  private counter<L extends string>(name: string, help: string, labelNames: L[]): Counter<L> {
    return new Counter<L>({ name, help, labelNames, registers: [this.registry] });
  }

  private mirrored(name: string, help: string, registers = [this.registry]): MirroredCounter {
    return new MirroredCounter(new Counter({ name, help, registers }));
  }

  private computed(name: string, help: string, type: 'summary' | 'histogram'): ComputedMetric {
    const metric = new ComputedMetric(name, help, type);
    this.registry.registerMetric(metric as unknown as Metric);
    return metric;
  }

  private renderCluster(cluster: ClusterStats | undefined): void {
    if (cluster === undefined) return;
    if (!this.clusterRegistered) {
      this.clusterRegistered = true;
      for (const metric of this.cluster.getMetricsAsArray()) {
        this.registry.registerMetric(metric as unknown as Metric);
      }
    }
    this.clusterNodes.set(cluster.members.length);
    this.clusterOwned.set(cluster.owned.length);
    this.clusterPartitions.reset();
    for (const [node, partitions] of Object.entries(cluster.owners)) {
      this.clusterPartitions.set({ node }, partitions.length);
    }
    this.leaseChanges.update(numberOf(cluster.leaseChanges));
    this.dataLosses.update(numberOf(cluster.dataLosses));
  }

  /** A request answered, or a stream (a response taken over) ended: by route and status. */
  observeAnswer(request: FastifyRequest, reply: FastifyReply): void {
    const { method } = request;
    const route = request.routeOptions.url ?? 'unmatched';
    this.httpRequests.inc({ method, route, status: reply.statusCode });
    this.httpDuration.observe({ method, route }, reply.elapsedTime / 1000);
  }

  closedAtCap(action: 'shed' | 'refused'): void {
    this.connectionsClosedAtCap.inc({ action });
  }

  /** A topic's label: its name if it has one of its own (or may take one), else OTHER_TOPIC. */
  private label(topic: string): string {
    if (this.labelled.has(topic)) return topic;
    if (this.labelled.size >= this.topics) return OTHER_TOPIC;
    this.labelled.add(topic);
    return topic;
  }

  /** Brings the queue-derived series up to date, then renders the whole registry. */
  async render(stats: QueueStats): Promise<string> {
    for (const [key, counter] of this.queueCounters) counter.update(numberOf(stats[key]));
    this.inMemory.set(numberOf(stats.inMemory));
    this.messages.reset();
    for (const [name, counts] of Object.entries(stats.topics)) {
      const topic = this.label(name);
      for (const state of STATES) this.messages.inc({ topic, state }, numberOf(counts[state]));
    }
    const others = stats.otherTopics;
    for (const state of STATES) {
      const n = numberOf(others?.[state]);
      if (n > 0) this.messages.inc({ topic: OTHER_TOPIC, state }, n);
    }
    this.pushInFlight.reset();
    const pushes = stats.push;
    // Totals of topics no longer pushed are forgotten: one pushed again counts from its new start.
    for (const key of this.pushSeen.keys()) {
      if (pushes[key.slice(0, key.indexOf('\n'))] === undefined) this.pushSeen.delete(key);
    }
    for (const [name, counts] of Object.entries(pushes)) {
      const topic = this.label(name);
      this.pushInFlight.inc({ topic }, numberOf(counts.inFlight));
      for (const outcome of ['succeeded', 'failed'] as const) {
        const key = `${name}\n${outcome}`;
        const total = numberOf(counts[outcome]);
        const last = this.pushSeen.get(key) ?? 0;
        if (total > last) this.pushRequests.inc({ topic, outcome }, total - last);
        this.pushSeen.set(key, Math.max(last, total));
      }
    }
    const store = stats.store ?? {};
    this.storeLive.set(numberOf(store.live));
    this.storeDead.set(numberOf(store.dead));
    this.logBytes.set(numberOf(store.logBytes));
    const fsyncs = numberOf(store.fsyncs);
    this.fsyncs.update(fsyncs);
    this.fsyncSeconds.update((numberOf(store.fsyncMsAvg) * fsyncs) / 1000);
    this.fsyncMax.set(numberOf(store.fsyncMsMax) / 1000);
    // The embedded queue's parts; a queue on Valkey/Redis has none of them.
    if (stats.loadFailing !== undefined) {
      this.failing.set({ part: 'load' }, numberOf(stats.loadFailing));
      this.failing.set({ part: 'index' }, numberOf(store.indexFailing));
      this.failing.set({ part: 'checkpoint' }, numberOf(store.checkpointFailing));
      this.stopped.set(numberOf(store.stopped));
    }
    this.fireLateness.samples = fireSamples(this.fireLateness.name, stats.latenessMs);
    this.deliveryLateness.samples = deliverySamples(
      this.deliveryLateness.name,
      stats.deliveryLatenessMs,
    );
    this.renderCluster(stats.cluster);
    return this.registry.metrics();
  }
}

function seconds(ms: number | undefined): number {
  return Math.max(0, numberOf(ms)) / 1000;
}

/** stats().latenessMs as a summary: p50, p99 and max (quantile 1), then _sum and _count. */
function fireSamples(name: string, figures: FireLateness): Sample[] {
  const samples: Sample[] = [];
  for (const [quantile, key] of [
    ['0.5', 'p50'],
    ['0.99', 'p99'],
    ['1', 'max'],
  ] as const) {
    const value = figures[key];
    if (value !== null) samples.push({ labels: { quantile }, value: seconds(value) });
  }
  samples.push({ metricName: `${name}_sum`, labels: {}, value: seconds(figures.sum) });
  samples.push({ metricName: `${name}_count`, labels: {}, value: numberOf(figures.count) });
  return samples;
}

/** stats().deliveryLatenessMs (cumulative buckets in ms) as a histogram in seconds. */
function deliverySamples(name: string, figures: DeliveryLateness): Sample[] {
  const count = numberOf(figures.count);
  const samples: Sample[] = figures.buckets.map(([le, n]) => ({
    metricName: `${name}_bucket`,
    labels: { le: String(le / 1000) },
    value: numberOf(n),
  }));
  samples.push({ metricName: `${name}_bucket`, labels: { le: '+Inf' }, value: count });
  samples.push({ metricName: `${name}_sum`, labels: {}, value: seconds(figures.sum) });
  samples.push({ metricName: `${name}_count`, labels: {}, value: count });
  return samples;
}
