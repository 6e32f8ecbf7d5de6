/**
 * SVG charts of a report, written by hand: panels of horizontal bars, one bar per peer, on a log
 * or linear axis, each labelled with its value. Plain SVG 1.1 with inline styles, so GitHub and
 * any browser render it as an <img>.
 */

import { formatNumber, formatRatio } from './report.mjs';

const WIDTH = 880;
const LABEL_X = 12;
const BAR_X = 196;
const BAR_WIDTH = 430;
const ROW = 20;
const BAR_HEIGHT = 13;
const PANEL_TITLE = 24;
const AXIS = 22;
const PANEL_GAP = 16;

/** One colour per peer, the same in every chart: blues for tickwheel, other hues for peers. */
const COLORS = {
  node: '#8c8c8c',
  heap: '#b07aa1',
  'timer-wheel': '#e49444',
  netty: '#d1615d',
  'tickwheel-closure': '#5b8cc8',
  'tickwheel-node-order': '#9ec3e6',
  'tickwheel-lean': '#1f4e8c',
  'tickwheel-hashed': '#7fb0dc',
  'tickwheel-kafka': '#4a9a8f',
};

const escape = (text) =>
  String(text).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

function logDomain(values) {
  const positive = values.filter((v) => v > 0);
  if (positive.length === 0) return [1, 10];
  // A decade below the smallest value whose bar would otherwise be a sliver.
  const low = 10 ** Math.floor(Math.log10(Math.min(...positive) / 3));
  let high = 10 ** Math.ceil(Math.log10(Math.max(...positive)));
  if (high === low) high = low * 10;
  return [low, high];
}

/** A round step (1, 2, 2.5 or 5 times a power of ten) near `raw`. */
function roundStep(raw) {
  const power = 10 ** Math.floor(Math.log10(raw));
  return ([1, 2, 2.5, 5, 10].find((m) => m * power >= raw) ?? 10) * power;
}

function linearDomain(values, marker) {
  const max = Math.max(...values.filter(Number.isFinite), marker ?? 0, 1e-9);
  const step = roundStep(max / 5);
  return [0, Math.ceil(max / step) * step, step];
}

function axisTicks(scale, [low, high, step]) {
  const ticks = [];
  if (scale === 'log') {
    for (let v = low; v <= high * 1.0001; v *= 10) ticks.push(v);
  } else {
    for (let v = low; v <= high + step / 1000; v += step) ticks.push(v);
  }
  return ticks;
}

function position(scale, [low, high], value) {
  if (!(value > 0) && scale === 'log') return 0;
  const f =
    scale === 'log'
      ? (Math.log10(value) - Math.log10(low)) / (Math.log10(high) - Math.log10(low))
      : (value - low) / (high - low);
  return Math.max(0, Math.min(1, f)) * BAR_WIDTH;
}

const tickLabel = (value) => {
  if (value >= 1e6) return `${value / 1e6}M`;
  if (value >= 1e3) return `${value / 1e3}k`;
  return String(Number(value.toPrecision(3)));
};

function panelSvg(panel, top) {
  const parts = [];
  const values = panel.bars.map((bar) => bar.value).filter((v) => Number.isFinite(v));
  const domain =
    panel.scale === 'log' ? logDomain(values) : linearDomain(values, panel.marker?.value);
  // A marker's label goes in a row of its own above the bars.
  const chartTop = top + PANEL_TITLE + (panel.marker === undefined ? 0 : 14);
  const chartHeight = panel.bars.length * ROW;
  parts.push(`<text x="${LABEL_X}" y="${top + 16}" class="panel">${escape(panel.title)}</text>`);
  for (const tick of axisTicks(panel.scale, domain)) {
    const x = BAR_X + position(panel.scale, domain, tick);
    parts.push(
      `<line x1="${x.toFixed(1)}" y1="${chartTop}" x2="${x.toFixed(1)}" y2="${chartTop + chartHeight}" class="grid"/>`,
      `<text x="${x.toFixed(1)}" y="${chartTop + chartHeight + 14}" class="tick">${tickLabel(tick)}</text>`,
    );
  }
  panel.bars.forEach((bar, index) => {
    const y = chartTop + index * ROW;
    const measured = Number.isFinite(bar.value);
    const w = measured ? Math.max(1, position(panel.scale, domain, bar.value)) : 0;
    parts.push(`<text x="${BAR_X - 8}" y="${y + 11}" class="label">${escape(bar.label)}</text>`);
    if (measured) {
      parts.push(
        `<rect x="${BAR_X}" y="${y + 1}" width="${w.toFixed(1)}" height="${BAR_HEIGHT}" fill="${bar.color}"/>`,
      );
    }
    parts.push(
      `<text x="${(BAR_X + w + 6).toFixed(1)}" y="${y + 11}" class="value">${escape(bar.text)}</text>`,
    );
  });
  if (panel.marker !== undefined) {
    const x = BAR_X + position(panel.scale, domain, panel.marker.value);
    parts.push(
      `<line x1="${x.toFixed(1)}" y1="${chartTop - 4}" x2="${x.toFixed(1)}" y2="${chartTop + chartHeight}" class="marker"/>`,
      `<text x="${(x + 4).toFixed(1)}" y="${chartTop - 6}" class="note">${escape(panel.marker.label)}</text>`,
    );
  }
  return { svg: parts.join('\n'), height: chartTop - top + chartHeight + AXIS };
}

/** An SVG document of stacked panels. */
export function chartSvg({ title, subtitle, panels }) {
  let y = subtitle ? 56 : 40;
  const body = [];
  for (const panel of panels) {
    const { svg, height } = panelSvg(panel, y);
    body.push(svg);
    y += height + PANEL_GAP;
  }
  const height = y;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="-apple-system, 'Segoe UI', Helvetica, Arial, sans-serif">
<title>${escape(title)}</title>
<style>
.title { font-size: 16px; font-weight: 600; fill: #222; }
.subtitle { font-size: 11px; fill: #666; }
.panel { font-size: 13px; font-weight: 600; fill: #333; }
.label { font-size: 11px; fill: #333; text-anchor: end; }
.value { font-size: 11px; fill: #333; }
.tick { font-size: 10px; fill: #777; text-anchor: middle; }
.note { font-size: 10px; fill: #b03030; }
.grid { stroke: #e4e4e4; stroke-width: 1; }
.marker { stroke: #b03030; stroke-width: 1.5; stroke-dasharray: 4 3; }
</style>
<rect width="100%" height="100%" fill="#ffffff"/>
<text x="${LABEL_X}" y="24" class="title">${escape(title)}</text>
${subtitle ? `<text x="${LABEL_X}" y="42" class="subtitle">${escape(subtitle)}</text>` : ''}
${body.join('\n')}
</svg>
`;
}

function bars(report, metricId, describe, missing = () => 'not measured') {
  const metric = report.metrics[metricId];
  return report.peers
    .filter((peer) => peer.status === 'measured')
    .map((peer) => {
      const value = metric.values[peer.id];
      return {
        label: peer.label,
        value,
        color: COLORS[peer.id] ?? '#999999',
        text: value === undefined ? missing(peer) : describe(peer, value),
      };
    });
}

/** Value and its ratio to Node's setTimeout, in words: ['faster', 'slower'] or the like. */
function withRatio(report, metricId, unit, [better, worse] = ['faster', 'slower']) {
  const baseline = report.metrics[metricId].values.node;
  return (peer, value) => {
    const text = `${formatNumber(value)} ${unit}`;
    if (baseline === undefined || peer.id === 'node') return text;
    const ratio = baseline / value;
    if (Math.abs(ratio - 1) < 0.02) return `${text}  (about the same as setTimeout)`;
    return ratio >= 1
      ? `${text}  (${formatRatio(ratio)} ${better} than setTimeout)`
      : `${text}  (${formatRatio(1 / ratio)} ${worse} than setTimeout)`;
  };
}

/** The charts of a report: { fileName: svgText }. */
export function chartsOf(report) {
  const env = report.environment;
  const subtitle =
    `N = ${report.options.n.toLocaleString('en-US')}; Node ${env.node}, ${env.cores} cores` +
    (env.java ? `; ${env.java}, Netty ${env.netty}` : '') +
    `; ${report.date.slice(0, 10)}`;
  const charts = {};
  const ops = [
    ['random.schedule', 'schedule, random delays 1 s - 10 min'],
    ['random.cancel', 'cancel, random delays'],
    ['fixed.schedule', `schedule, one fixed delay (${report.options.fixedDelay / 1000} s)`],
    ['fixed.cancel', 'cancel, fixed delay'],
    ['churn.op', 'churn at N pending: refresh, or cancel + schedule'],
  ].filter(([id]) => Object.keys(report.metrics[id].values).length > 0);
  if (ops.length > 0) {
    charts['timers-ops.svg'] = chartSvg({
      title: 'Timer operations: ns per operation (log scale; shorter is better)',
      subtitle,
      panels: ops.map(([id, title]) => ({
        title,
        scale: 'log',
        bars: bars(report, id, withRatio(report, id, 'ns')),
      })),
    });
  }
  const storm = report.results['expiry-storm'];
  const steady = report.results['steady-state'];
  const realClock = [];
  if (storm !== undefined) {
    realClock.push({
      title: `expiry storm: drain time per expiration, ns (log; N timers due within ${report.options.stormWindow} ms)`,
      scale: 'log',
      bars: bars(
        report,
        'storm.drain',
        (peer, value) => {
          const perSecond = storm[peer.id]?.drain?.perSecond;
          return `${formatNumber(value)} ns  (${formatNumber(perSecond / 1e6)}M/s)`;
        },
        (peer) => {
          const drain = storm[peer.id]?.drain;
          if (drain === undefined) return 'not measured';
          if (!drain.complete) {
            return `lost timers: ${drain.fired.toLocaleString('en-US')} of ${report.options.n.toLocaleString('en-US')} fired`;
          }
          return drain.valid === false ? 'still scheduling in the window' : 'not measured';
        },
      ),
    });
    realClock.push(
      latenessPanel(report, 'expiry storm: p99 lateness, ms (log)', (id) => {
        const lateness = storm[id]?.lateness;
        return lateness?.complete ? lateness : lateness && { ...lateness, lost: true };
      }),
    );
  }
  if (steady !== undefined) {
    realClock.push(
      latenessPanel(
        report,
        `steady state: p99 lateness, ms (log; ~${report.options.steadyRate.toLocaleString('en-US')} expirations/s)`,
        (id) => steady[id],
      ),
    );
    realClock.push({
      title: 'steady state: process CPU, % of one core (linear)',
      scale: 'linear',
      bars: report.peers
        .filter((peer) => peer.status === 'measured')
        .map((peer) => {
          const r = steady[peer.id];
          const value = r?.cpuPercent;
          return {
            label: peer.label,
            value,
            color: COLORS[peer.id] ?? '#999999',
            text:
              value === undefined
                ? 'not measured'
                : `${formatNumber(value)} %  (${Math.round(r.rate).toLocaleString('en-US')} fired/s)`,
          };
        }),
    });
  }
  if (realClock.length > 0) {
    charts['timers-real-clock.svg'] = chartSvg({
      title: 'On the real clock: expiry storm and steady state',
      subtitle,
      panels: realClock,
    });
  }
  if (Object.keys(report.metrics['memory.bytes'].values).length > 0) {
    charts['timers-memory.svg'] = chartSvg({
      title: 'Memory: bytes per pending timer at N pending (heap + array buffers, after gc)',
      subtitle,
      panels: [
        {
          title: 'bytes per pending timer (linear; shorter is better)',
          scale: 'linear',
          marker: { value: 40, label: 'target: 40 B (lean path)' },
          bars: bars(
            report,
            'memory.bytes',
            withRatio(report, 'memory.bytes', 'B', ['less', 'more']),
          ),
        },
      ],
    });
  }
  return charts;
}

function latenessPanel(report, title, resultOf) {
  return {
    title,
    scale: 'log',
    bars: report.peers
      .filter((peer) => peer.status === 'measured')
      .map((peer) => {
        const r = resultOf(peer.id);
        const value = r?.p99Ms;
        let text = 'not measured';
        if (typeof value === 'number') {
          text = `p99 ${formatNumber(value)} ms, max ${formatNumber(r.maxMs)}`;
          if (r.early > 0) text += `, ${r.early.toLocaleString('en-US')} early`;
          if (r.lost) text += `, only ${r.fired.toLocaleString('en-US')} fired`;
          if (r.valid === false) text += ', still scheduling in the window';
        }
        return { label: peer.label, value, color: COLORS[peer.id] ?? '#999999', text };
      }),
  };
}
