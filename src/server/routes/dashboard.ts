/**
 * The JSON behind the web dashboard: GET /v1/dashboard and GET /v1/messages/:id/preview. A
 * snapshot walks the in-memory messages and the wheel, so one is built at most every SNAPSHOT_MS
 * and shared meanwhile. Rates are left to the page: the server keeps no history.
 */

import type { FastifyPluginAsync } from 'fastify';
import {
  COUNTER_NAMES,
  type ClusterStats,
  type StoreStats,
  type TopicStateCounts,
} from '../../protocol/model.js';
import type { RouteGroupOptions, ServerContext } from '../context.js';
import { notFound } from '../errors.js';
import { dashboardSchema, previewSchema } from '../schemas/status.js';

const SNAPSHOT_MS = 1000;
/**
 * The timeline of upcoming deliveries. Past its in-memory horizon the queue counts by the minute,
 * so an edge there moves to a whole minute; each bucket says the edges its count is exact for.
 */
const UPCOMING: ReadonlyArray<{ label: string; untilMs: number | null }> = [
  { label: '< 1 s', untilMs: 1_000 },
  { label: '1-10 s', untilMs: 10_000 },
  { label: '10-60 s', untilMs: 60_000 },
  { label: '1-60 min', untilMs: 3_600_000 },
  { label: '1-24 h', untilMs: 86_400_000 },
  { label: '> 1 day', untilMs: null },
];
const UPCOMING_EDGES_MS = UPCOMING.flatMap((bucket) =>
  bucket.untilMs === null ? [] : [bucket.untilMs],
);
/** Wheel rows counted per snapshot; past it a slot shows 1 (HierarchicalWheel.snapshot). */
const WHEEL_ROW_BUDGET = 200_000;
/** Cells drawn per level of the wheel at most (see foldWheel). */
const WHEEL_CELLS = 64;
const PREVIEW_CHARS = 400;

/** Everything the page draws, in one answer (dashboardSchema says the same, checked by a test). */
export type DashboardSnapshot = Awaited<ReturnType<typeof buildSnapshot>>;

/** stats().cluster as the dashboard shows it: one row per node, live ones first. */
function clusterView(c: ClusterStats | undefined) {
  if (c === undefined) return null;
  const names = new Set([...c.members, ...Object.keys(c.owners)]);
  const nodes = [...names]
    .map((node) => ({ node, partitions: c.owners[node] ?? [], alive: c.members.includes(node) }))
    .sort((a, b) => Number(b.alive) - Number(a.alive) || a.node.localeCompare(b.node));
  return {
    node: c.node,
    queue: c.queue,
    partitions: c.partitions,
    // A string on the wire, as dashboardSchema says: a newer setting is shown, not refused. On
    // PostgreSQL the setting is synchronous_commit's value ("on"), which says little alone.
    durability:
      (c.durabilityOption as string) === 'synchronous_commit'
        ? `synchronous_commit ${c.durability}`
        : (c.durability as string),
    nodes,
    leaseChanges: c.leaseChanges,
  };
}

async function buildSnapshot(context: ServerContext) {
  const { queue } = context;
  const stats = await queue.stats();
  // The file store reports live and dead messages; a partitioned queue (Valkey/Redis, PostgreSQL) its totals.
  const store = stats.store ?? liveOf(stats.totals);
  const due = await queue.dueTimeline(UPCOMING_EDGES_MS);
  const lateness = stats.latenessMs;
  return {
    now: Date.now(),
    version: context.version,
    uptimeMs: Math.round(performance.now() - context.startedAt),
    counters: Object.fromEntries(COUNTER_NAMES.map((name) => [name, stats[name]])),
    topics: stats.topics,
    topicCount: stats.topicCount,
    otherTopics: stats.otherTopics,
    totals: {
      inMemory: stats.inMemory,
      live: store.live ?? null,
      dead: store.dead ?? null,
      loadedUntil: stats.loadedUntil ?? 0,
    },
    latenessMs: { p50: lateness.p50, p99: lateness.p99, max: lateness.max },
    upcoming: UPCOMING.map(({ label }, i) => ({
      label,
      fromMs: i === 0 ? 0 : due.edgesMs[i - 1],
      untilMs: i < due.edgesMs.length ? due.edgesMs[i] : null,
      count: due.counts[i],
    })),
    wheel: foldWheel(queue.wheelSnapshot(WHEEL_ROW_BUDGET)),
    cluster: clusterView(stats.cluster),
  };
}

/**
 * The wheel as the page draws it: per level, at most WHEEL_CELLS cells, each the sum of
 * `slotsPerCell` consecutive slots, and the cell the level's cursor is in.
 */
function foldWheel(snapshot: ReturnType<ServerContext['queue']['wheelSnapshot']>) {
  const levels = snapshot.levels.map(({ cursor, slots }) => {
    const slotsPerCell = Math.ceil(slots.length / WHEEL_CELLS);
    if (slotsPerCell === 1) return { cursor, slots, slotsPerCell };
    const cells = new Array<number>(Math.ceil(slots.length / slotsPerCell)).fill(0);
    for (let slot = 0; slot < slots.length; slot++) {
      cells[Math.floor(slot / slotsPerCell)] += slots[slot];
    }
    return { cursor: Math.floor(cursor / slotsPerCell), slots: cells, slotsPerCell };
  });
  return { levels, truncated: snapshot.truncated };
}

function liveOf(t: TopicStateCounts | undefined): StoreStats {
  if (t === undefined) return {};
  return { live: t.scheduled + t.ready + t.inflight + t.dead, dead: t.dead };
}

export const dashboardRoutes: FastifyPluginAsync<RouteGroupOptions> = async (app, { context }) => {
  let cached: { at: number; snapshot: Promise<DashboardSnapshot> } | undefined;

  app.get('/dashboard', { schema: dashboardSchema }, async () => {
    const now = performance.now();
    if (cached === undefined || now - cached.at >= SNAPSHOT_MS) {
      const snapshot = buildSnapshot(context);
      cached = { at: now, snapshot };
      // A failed snapshot is not kept: the next request tries again.
      snapshot.catch(() => {
        if (cached?.snapshot === snapshot) cached = undefined;
      });
    }
    return cached.snapshot;
  });

  app.get<{ Params: { id: string } }>(
    '/messages/:id/preview',
    { schema: previewSchema },
    async (request) => {
      const preview = await context.queue.payloadPreview(request.params.id, PREVIEW_CHARS);
      if (preview !== undefined) return preview;
      throw notFound(`no live or dead message with id ${request.params.id}`);
    },
  );
};
