/**
 * The JSON behind the web dashboard: GET /v1/dashboard (one snapshot of everything the page
 * draws) and GET /v1/messages/:id/preview (the start of a payload).
 *
 * Any number of open dashboards cost the queue one snapshot per second: a snapshot walks the
 * in-memory messages and the wheel, so it is built at most once per SNAPSHOT_MS and shared by
 * every request in that second. Rates are left to the page (deltas of the cumulative counters
 * between two polls), so the server keeps no history.
 */

import type { FastifyInstance } from 'fastify';
import type { ServerContext } from '../context.js';
import { notFound } from '../errors.js';
import { getSchema } from '../schemas.js';

const SNAPSHOT_MS = 1000;
/** Edges of the due-time histogram, in ms from now. */
const UPCOMING_EDGES_MS = [1_000, 5_000, 15_000, 60_000, 3_600_000, 86_400_000];
const UPCOMING_LABELS = ['< 1 s', '1-5 s', '5-15 s', '15-60 s', '1-60 min', '1-24 h', '> 1 day'];
/** Wheel rows counted per snapshot; past it a slot shows 1 (see HierarchicalWheel.snapshot). */
const WHEEL_ROW_BUDGET = 200_000;
const PREVIEW_CHARS = 400;

export interface DashboardSnapshot {
  now: number;
  version: string;
  uptimeMs: number;
  counters: Record<string, number>;
  topics: Record<string, { scheduled: number; ready: number; inflight: number }>;
  totals: { inMemory: number; live: number | null; dead: number | null; loadedUntil: number };
  latenessMs: { p50: number | null; p99: number | null; max: number | null };
  upcoming: Array<{ label: string; count: number }>;
  wheel: ReturnType<ServerContext['queue']['wheelSnapshot']>;
}

const COUNTERS = [
  'scheduled',
  'deduplicated',
  'fired',
  'delivered',
  'acked',
  'nacked',
  'expired',
  'dead',
  'cancelled',
  'rescheduled',
];

async function buildSnapshot(context: ServerContext): Promise<DashboardSnapshot> {
  const { queue } = context;
  const stats = await queue.stats();
  const counters: Record<string, number> = {};
  for (const name of COUNTERS) counters[name] = Number(stats[name] ?? 0);
  const store = (stats.store ?? {}) as Record<string, number>;
  const inMemory = Number(stats.inMemory ?? 0);
  const near = queue.dueHistogram(UPCOMING_EDGES_MS);
  // Messages beyond the horizon are not in memory: the store knows how many, not when.
  const beyond = typeof store.live === 'number' ? Math.max(0, store.live - inMemory) : 0;
  return {
    now: Date.now(),
    version: context.version,
    uptimeMs: Math.round(performance.now() - context.startedAt),
    counters,
    topics: stats.topics as DashboardSnapshot['topics'],
    totals: {
      inMemory,
      live: typeof store.live === 'number' ? store.live : null,
      dead: typeof store.dead === 'number' ? store.dead : null,
      loadedUntil: Number(stats.loadedUntil ?? 0),
    },
    latenessMs: stats.latenessMs as DashboardSnapshot['latenessMs'],
    upcoming: [
      ...UPCOMING_LABELS.map((label, i) => ({ label, count: near[i] })),
      { label: 'beyond horizon', count: beyond },
    ],
    wheel: queue.wheelSnapshot(WHEEL_ROW_BUDGET),
  };
}

export function dashboardRoutes(app: FastifyInstance, context: ServerContext): void {
  let cached: { at: number; snapshot: Promise<DashboardSnapshot> } | undefined;

  app.get('/dashboard', async () => {
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
    { schema: { params: getSchema.params } },
    async (request) => {
      const preview = await context.queue.payloadPreview(request.params.id, PREVIEW_CHARS);
      if (preview === undefined)
        throw notFound(`no live or dead message with id ${request.params.id}`);
      return preview;
    },
  );
}
