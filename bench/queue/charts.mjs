/**
 * Hand-written SVG bar charts of the results: no chart library, so they render anywhere (a
 * browser, GitHub, an editor preview) and diff as text.
 *
 * A chart is a list of groups (one metric each), each with one horizontal bar per peer, a value
 * label at the end of every bar and, optionally, the target as a dashed line. With `log: true`
 * bar lengths follow log10 of the value, for metrics where the peers differ by orders of
 * magnitude.
 */

const PEER_COLOURS = { tickwheel: '#2563eb', bullmq: '#dc2626' };
const PEER_LABELS = { tickwheel: 'tickwheel', bullmq: 'BullMQ' };

const WIDTH = 820;
const LABEL_WIDTH = 250;
const BAR_AREA = 420;
const BAR_HEIGHT = 18;
const BAR_GAP = 4;
const GROUP_GAP = 16;
const TOP = 78;

function escape(text) {
  return String(text)
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;');
}

function scaleFor(groups, log) {
  const values = groups.flatMap((group) => [
    ...group.bars.map((bar) => bar.value),
    ...(group.target === undefined ? [] : [group.target]),
  ]);
  const positive = values.filter((value) => typeof value === 'number' && value > 0);
  const max = positive.length === 0 ? 1 : Math.max(...positive);
  if (!log) return (value) => (value > 0 ? (value / (max * 1.05)) * BAR_AREA : 0);
  const low = Math.log10(Math.min(...positive, max) / 2);
  const high = Math.log10(max * 1.2);
  return (value) =>
    value > 0 ? Math.max(2, ((Math.log10(value) - low) / (high - low || 1)) * BAR_AREA) : 0;
}

/**
 * groups: [{ label, target?, targetLabel?, bars: [{ peer, value, text }] }]; a bar whose value is
 * not a positive number is drawn as a note ("not measured") instead.
 */
export function barChart({ title, subtitle, groups, log = false, note }) {
  const x = scaleFor(groups, log);
  const rows = [];
  let y = TOP;
  for (const group of groups) {
    const height = group.bars.length * (BAR_HEIGHT + BAR_GAP) - BAR_GAP;
    rows.push(
      `<text x="${LABEL_WIDTH - 10}" y="${y + height / 2 + 4}" text-anchor="end" class="label">${escape(group.label)}</text>`,
    );
    // Bars, then the target line over them, then the values (with a halo) over both.
    const values = [];
    let barY = y;
    for (const bar of group.bars) {
      const colour = PEER_COLOURS[bar.peer] ?? '#6b7280';
      const peer = PEER_LABELS[bar.peer] ?? bar.peer;
      if (typeof bar.value === 'number' && bar.value > 0) {
        const length = x(bar.value);
        rows.push(
          `<rect x="${LABEL_WIDTH}" y="${barY}" width="${length.toFixed(1)}" height="${BAR_HEIGHT}" rx="2" fill="${colour}"><title>${escape(`${peer}: ${bar.text}`)}</title></rect>`,
        );
        values.push(
          `<text x="${(LABEL_WIDTH + length + 6).toFixed(1)}" y="${barY + 13}" class="value">${escape(bar.text)}</text>`,
        );
      } else {
        values.push(
          `<text x="${LABEL_WIDTH + 4}" y="${barY + 13}" class="missing">${escape(`${peer}: ${bar.text ?? 'not measured'}`)}</text>`,
        );
      }
      barY += BAR_HEIGHT + BAR_GAP;
    }
    if (group.target !== undefined) {
      const tx = LABEL_WIDTH + x(group.target);
      rows.push(
        `<line x1="${tx.toFixed(1)}" x2="${tx.toFixed(1)}" y1="${y - 3}" y2="${y + height + 3}" class="target"/>`,
        `<text x="${(tx + 3).toFixed(1)}" y="${y - 5}" class="target-label">${escape(group.targetLabel ?? `target ${group.target}`)}</text>`,
      );
    }
    rows.push(...values);
    y = barY + GROUP_GAP - BAR_GAP;
  }
  const legend = Object.entries(PEER_LABELS)
    .map(
      ([peer, label], i) =>
        `<rect x="${LABEL_WIDTH + i * 120}" y="46" width="12" height="12" fill="${PEER_COLOURS[peer]}"/><text x="${LABEL_WIDTH + i * 120 + 18}" y="56" class="value">${label}</text>`,
    )
    .join('');
  const height = y + (note === undefined ? 10 : 30);
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="system-ui, -apple-system, Segoe UI, sans-serif">
<style>
  .title { font-size: 16px; font-weight: 600; fill: #111827; }
  .subtitle { font-size: 12px; fill: #4b5563; }
  .label { font-size: 12px; fill: #111827; }
  .value { font-size: 12px; fill: #111827; paint-order: stroke; stroke: #ffffff; stroke-width: 3px; }
  .missing { font-size: 12px; fill: #6b7280; font-style: italic; }
  .target { stroke: #111827; stroke-width: 1.5; stroke-dasharray: 4 3; }
  .target-label { font-size: 10px; fill: #111827; }
  .note { font-size: 11px; fill: #6b7280; }
</style>
<rect width="100%" height="100%" fill="#ffffff"/>
<text x="16" y="24" class="title">${escape(title)}</text>
<text x="16" y="40" class="subtitle">${escape(subtitle ?? '')}</text>
${legend}
${rows.join('\n')}
${note === undefined ? '' : `<text x="16" y="${height - 12}" class="note">${escape(note)}</text>`}
</svg>
`;
}
