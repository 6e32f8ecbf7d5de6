/**
 * From the cells' results to what people read: the headline metrics, the ratio of every peer
 * to every other, the issue's targets and where tickwheel stands on each, and the text tables.
 *
 * A ratio is value(column) / value(row) of a lower-is-better metric: how many times cheaper the
 * row's peer is than the column's. 20 means "20x faster"; below 1 means slower.
 */

import { metricValue, WORKLOADS } from './workloads.mjs';

/** { metricId: { workload, label, unit, values: { peerId: number } } } */
export function collectMetrics(results) {
  const metrics = {};
  for (const workload of WORKLOADS) {
    for (const metric of workload.metrics) {
      const values = {};
      for (const [peerId, result] of Object.entries(results[workload.id] ?? {})) {
        const value = metricValue(result, metric);
        if (value !== undefined && value > 0) values[peerId] = value;
      }
      metrics[metric.id] = {
        workload: workload.id,
        label: metric.label,
        unit: metric.unit,
        values,
      };
    }
  }
  return metrics;
}

/** { metricId: { rowPeer: { columnPeer: ratio } } } */
export function ratiosOf(metrics) {
  const ratios = {};
  for (const [id, metric] of Object.entries(metrics)) {
    const table = {};
    for (const [row, value] of Object.entries(metric.values)) {
      table[row] = {};
      for (const [column, other] of Object.entries(metric.values))
        table[row][column] = other / value;
    }
    ratios[id] = table;
  }
  return ratios;
}

/** Ticks of the tickwheel peers (ms): the lateness targets allow one tick plus a few ms. */
const TICK_MS = {
  'tickwheel-closure': 1,
  'tickwheel-node-order': 1,
  'tickwheel-lean': 1,
  'tickwheel-hashed': 100,
  'tickwheel-kafka': 1,
};
const FEW_MS = 3;

/**
 * The targets. `value` is what was measured (null when a peer it needs was not run),
 * `met` is true, false, or null for "not measured".
 */
export function evaluateTargets(results, metrics, ratios) {
  const targets = [];
  const ratio = (metricId, row, column) => ratios[metricId]?.[row]?.[column] ?? null;
  const atLeast = (id, text, value, limit, unit = 'x') =>
    targets.push({ id, text, value, limit, unit, met: value === null ? null : value >= limit });
  const atMost = (id, text, value, limit, unit) =>
    targets.push({ id, text, value, limit, unit, met: value === null ? null : value <= limit });

  atLeast(
    'lean-schedule-vs-settimeout',
    'lean schedule vs setTimeout, random delays, warm: >= 20x faster',
    ratio('random.schedule', 'tickwheel-lean', 'node'),
    20,
  );
  atLeast(
    'lean-schedule-vs-settimeout-cold',
    'lean schedule vs setTimeout, random delays, cold: >= 10x faster',
    ratio('random.scheduleCold', 'tickwheel-lean', 'node'),
    10,
  );
  atLeast(
    'lean-cancel-vs-settimeout',
    'lean cancel vs clearTimeout, random delays: >= 10x faster',
    ratio('random.cancel', 'tickwheel-lean', 'node'),
    10,
  );
  atLeast(
    'closure-schedule-vs-settimeout',
    'closure setTimeout vs setTimeout, random delays, warm: >= 15x faster',
    ratio('random.schedule', 'tickwheel-closure', 'node'),
    15,
  );
  atLeast(
    'closure-schedule-vs-settimeout-cold',
    'closure setTimeout vs setTimeout, random delays, cold: >= 10x faster',
    ratio('random.scheduleCold', 'tickwheel-closure', 'node'),
    10,
  );
  atLeast(
    'closure-cancel-vs-settimeout',
    'closure clearTimeout vs clearTimeout, random delays: >= 10x faster',
    ratio('random.cancel', 'tickwheel-closure', 'node'),
    10,
  );
  atMost(
    'lean-memory',
    'lean path: <= 40 bytes per pending timer at N pending',
    metrics['memory.bytes']?.values['tickwheel-lean'] ?? null,
    40,
    'B',
  );
  for (const [peer, name] of [
    ['tickwheel-lean', 'lean'],
    ['tickwheel-closure', 'closure'],
  ]) {
    for (const [metric, delays] of [
      ['random.total', 'random delays'],
      ['fixed.total', 'fixed delay'],
    ]) {
      atLeast(
        `${name}-vs-netty-${metric.split('.')[0]}`,
        `${name} schedule + cancel faster than Netty on the JVM, ${delays}: > 1x`,
        ratio(metric, peer, 'netty'),
        1.0000001,
      );
    }
  }
  for (const [peer, name] of [
    ['tickwheel-lean', 'lean'],
    ['tickwheel-closure', 'closure'],
  ]) {
    const drain = results['expiry-storm']?.[peer]?.drain;
    atLeast(
      `${name}-storm-drain`,
      `${name}: expiry storm drained at >= 10M expirations/s`,
      drain?.valid && drain.complete ? drain.perSecond / 1e6 : null,
      10,
      'M/s',
    );
  }
  let early = null;
  for (const peer of Object.keys(TICK_MS)) {
    for (const value of [
      results['expiry-storm']?.[peer]?.lateness?.early,
      results['steady-state']?.[peer]?.early,
    ]) {
      if (typeof value === 'number') early = (early ?? 0) + value;
    }
  }
  atMost('never-early', 'no tickwheel timer early (storm and steady state)', early, 0, 'timers');
  for (const [peer, tick] of Object.entries(TICK_MS)) {
    const lateness = results['expiry-storm']?.[peer]?.lateness;
    atMost(
      `${peer}-storm-p99`,
      `${peer}: storm p99 lateness <= one tick (${tick} ms) + ${FEW_MS} ms`,
      lateness?.valid && lateness.complete ? lateness.p99Ms : null,
      tick + FEW_MS,
      'ms',
    );
  }
  return targets;
}

// --- Text tables ------------------------------------------------------------------------------

const group = (value, digits = 0) =>
  value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

export function formatNumber(value) {
  if (value === undefined || value === null || !Number.isFinite(value)) return '-';
  if (Number.isInteger(value)) return group(value);
  const magnitude = Math.abs(value);
  if (magnitude >= 100) return group(value);
  if (magnitude >= 10) return group(value, 1);
  return group(value, 2);
}

export function formatRatio(value) {
  if (value === undefined || value === null || !Number.isFinite(value)) return '-';
  if (value >= 100) return `${group(value)}x`;
  if (value >= 10) return `${group(value, 1)}x`;
  return `${group(value, 2)}x`;
}

function table(header, rows, align) {
  const widths = header.map((cell, c) => Math.max(cell.length, ...rows.map((r) => r[c].length)));
  const line = (cells) =>
    cells
      .map((cell, c) => (align[c] === 'l' ? cell.padEnd(widths[c]) : cell.padStart(widths[c])))
      .join('  ')
      .trimEnd();
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

function ratioTable(metric, ratios, peers) {
  const measured = peers.filter((peer) => metric.values[peer.id] !== undefined);
  if (measured.length === 0) return '(not measured)';
  const header = ['peer', metric.unit, ...measured.map((peer) => `vs ${peer.short}`)];
  const rows = measured.map((row) => [
    row.label,
    formatNumber(metric.values[row.id]),
    ...measured.map((column) => formatRatio(ratios[row.id][column.id])),
  ]);
  return table(header, rows, ['l', 'r', ...measured.map(() => 'r')]);
}

function stormTable(results, peers) {
  const rows = peers
    .filter((peer) => results[peer.id] !== undefined)
    .map((peer) => {
      const r = results[peer.id];
      if (r.error) return [peer.label, 'error', '', '', '', '', '', '', ''];
      const lateness = r.lateness ?? {};
      const drain = r.drain ?? {};
      return [
        peer.label,
        drain.complete ? formatNumber(drain.nsPerExpiration) + (drain.valid ? '' : '?') : 'lost',
        drain.complete ? formatNumber(drain.perSecond / 1e6) : '-',
        formatNumber(lateness.p50Ms) + (lateness.valid === false ? '?' : ''),
        formatNumber(lateness.p99Ms),
        formatNumber(lateness.maxMs),
        lateness.early === undefined ? '-' : group(lateness.early),
        lateness.complete ? 'all' : `${group(lateness.fired ?? 0)} of ${group(r.n)}`,
        formatNumber(lateness.loopBusyPercent),
      ];
    });
  return table(
    [
      'peer (? = scheduling ran into the window)',
      'drain ns/exp',
      'M exp/s',
      'late p50 ms',
      'p99 ms',
      'max ms',
      'early',
      'fired',
      'loop busy %',
    ],
    rows,
    ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
  );
}

function steadyTable(results, peers) {
  const rows = peers
    .filter((peer) => results[peer.id] !== undefined)
    .map((peer) => {
      const r = results[peer.id];
      if (r.error) return [peer.label, 'error', '', '', '', '', '', '', ''];
      return [
        peer.label,
        group(r.rate ?? 0),
        formatNumber(r.p50Ms),
        formatNumber(r.p99Ms),
        formatNumber(r.p999Ms),
        formatNumber(r.maxMs),
        r.early === undefined ? '-' : group(r.early),
        formatNumber(r.cpuPercent),
        formatNumber(r.cpuNsPerExpiration),
      ];
    });
  return table(
    [
      'peer',
      'fired/s',
      'late p50 ms',
      'p99 ms',
      'p99.9 ms',
      'max ms',
      'early',
      'CPU %',
      'CPU ns/exp',
    ],
    rows,
    ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
  );
}

function targetTable(targets) {
  const rows = targets.map((target) => [
    target.text,
    target.value === null
      ? 'not measured'
      : target.unit === 'x'
        ? formatRatio(target.value)
        : `${formatNumber(target.value)} ${target.unit}`,
    target.met === null ? '-' : target.met ? 'met' : 'MISSED',
  ]);
  return table(['target', 'measured', ''], rows, ['l', 'r', 'l']);
}

/** The whole report as text: one block per workload, then the targets. */
export function formatReport(report) {
  const { results, metrics, ratios, targets, options } = report;
  const peers = report.peers.filter((peer) => peer.status === 'measured');
  const out = [];
  const n = group(options.n);
  out.push(
    `tickwheel timer benchmarks: N = ${n}, Node ${report.environment.node}, ` +
      `${report.environment.cores} cores (${report.environment.cpu})` +
      (report.environment.java
        ? `, ${report.environment.java}, Netty ${report.environment.netty}`
        : ''),
  );
  out.push(
    'Ratios: how many times cheaper the row is than the column (20x = 20 times faster; < 1 = slower).',
  );
  for (const workload of WORKLOADS) {
    if (results[workload.id] === undefined) continue;
    const workloadResults = results[workload.id];
    const failed = peers.filter((peer) => workloadResults[peer.id]?.error);
    if (workload.id === 'expiry-storm') {
      out.push('', `== expiry storm: ${n} timers due within the same ${options.stormWindow} ms ==`);
      out.push(stormTable(workloadResults, peers));
    } else if (workload.id === 'steady-state') {
      out.push(
        '',
        `== steady state: ~${group(options.steadyRate)} expirations/s for ${options.steadySeconds} s ==`,
      );
      out.push(steadyTable(workloadResults, peers));
    }
    for (const metric of workload.metrics) {
      out.push('', `== ${metric.label} (${metric.unit}) ==`);
      out.push(ratioTable(metrics[metric.id], ratios[metric.id], peers));
    }
    for (const peer of failed) {
      out.push(`  ${peer.label} failed: ${workloadResults[peer.id].error.split('\n')[0]}`);
    }
  }
  const skipped = report.peers.filter((peer) => peer.status === 'skipped');
  if (skipped.length > 0) {
    out.push('');
    for (const peer of skipped) out.push(`skipped ${peer.label}: ${peer.reason}`);
  }
  out.push('', '== targets ==', targetTable(targets));
  return out.join('\n');
}
