// A uPlot line chart that keeps one instance and only swaps its data on each poll.
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { clock } from './format.js';

export interface Series {
  label: string;
  stroke: string;
}

/**
 * The time axis spans at least this much, ending at the latest poll. Left to itself uPlot pads a
 * range of one point (or none) by years either side, so a fresh page showed 2027-2029.
 */
const MIN_WINDOW_S = 60;

/** [from, to] in seconds of the time axis: the polls so far, and at least the last minute. */
function timeRange(times: ArrayLike<number>): [number, number] {
  const last = times.length > 0 ? times[times.length - 1] : Date.now() / 1000;
  const first = times.length > 0 ? times[0] : last;
  return [Math.min(first, last - MIN_WINDOW_S), last];
}

/** Rates and lateness are never negative: the value axis starts at 0, and spans 0-1 when empty. */
function valueRange(max: number | null): [number, number] {
  if (max === null || !(max > 0)) return [0, 1];
  const [, top] = uPlot.rangeNum(0, max, 0.1, true);
  return [0, top ?? max];
}

export function LineChart(props: {
  title: string;
  unit: string;
  series: Series[];
  /** [times in seconds, ...one array per series] */
  data: Array<Array<number | null>>;
  /** Shown over the chart while no series has a value. */
  emptyText: string;
  testid: string;
}) {
  const card = useRef<HTMLElement>(null);
  const host = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);

  useEffect(() => {
    const element = host.current;
    const section = card.current;
    if (element === null || section === null) return;
    const chart = new uPlot(
      {
        width: Math.max(280, element.clientWidth),
        height: 180,
        legend: { live: false },
        cursor: { show: false },
        scales: {
          x: { time: true, range: (u) => timeRange(u.data[0]) },
          y: { range: (_u, _min, max) => valueRange(max) },
        },
        axes: [
          {
            // Local time of day; the window is ten minutes at most, so no date is needed.
            values: (_u, splits, _axis, _space, increment) => {
              const labels = splits.map((s) => clock(s * 1000, increment < 60));
              // The drawn labels are pixels on a canvas; the browser test reads them here.
              section.dataset.xLabels = labels.join(' ');
              return labels;
            },
          },
          { label: props.unit, size: 56 },
        ],
        series: [{}, ...props.series.map((s) => ({ label: s.label, stroke: s.stroke, width: 2 }))],
        hooks: {
          draw: [
            (u) => {
              section.dataset.xFrom = String(Math.round((u.scales.x.min ?? 0) * 1000));
              section.dataset.xTo = String(Math.round((u.scales.x.max ?? 0) * 1000));
              section.dataset.points = String(u.data[0].length);
            },
          ],
        },
      },
      props.data as uPlot.AlignedData,
      element,
    );
    plot.current = chart;
    const resize = () => chart.setSize({ width: Math.max(280, element.clientWidth), height: 180 });
    window.addEventListener('resize', resize);
    return () => {
      window.removeEventListener('resize', resize);
      chart.destroy();
      plot.current = null;
    };
    // The chart's shape is fixed for its lifetime; data changes go through setData below.
  }, []);

  useEffect(() => {
    plot.current?.setData(props.data as uPlot.AlignedData);
  }, [props.data]);

  const empty = props.data.slice(1).every((values) => values.every((v) => v === null));
  return (
    <section class="card wide" ref={card} data-testid={props.testid}>
      <h2>{props.title}</h2>
      <div class="chart-frame">
        <div ref={host} class="chart" />
        {empty && <div class="chart-empty">{props.emptyText}</div>}
      </div>
    </section>
  );
}
