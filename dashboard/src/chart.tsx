// A uPlot line chart that keeps one instance and only swaps its data on each poll.
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

export interface Series {
  label: string;
  stroke: string;
}

export function LineChart(props: {
  title: string;
  unit: string;
  series: Series[];
  /** [times in seconds, ...one array per series] */
  data: Array<Array<number | null>>;
}) {
  const host = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);

  useEffect(() => {
    const element = host.current;
    if (element === null) return;
    const chart = new uPlot(
      {
        width: Math.max(280, element.clientWidth),
        height: 180,
        legend: { live: false },
        cursor: { show: false },
        scales: { x: { time: true } },
        axes: [{}, { label: props.unit, size: 56 }],
        series: [{}, ...props.series.map((s) => ({ label: s.label, stroke: s.stroke, width: 2 }))],
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

  return (
    <section class="card wide">
      <h2>{props.title}</h2>
      <div ref={host} class="chart" />
    </section>
  );
}
