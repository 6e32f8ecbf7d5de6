/** The markdown report of a bench:postgres run, from its JSON (also `--from <json>`). */

import { formatBytes, formatMs, formatNumber } from '../queue/stats.mjs';
import { targetsSection } from './targets.mjs';

const PEER_NAMES = { tickwheel: 'tickwheel', 'pg-boss': 'pg-boss', graphile: 'Graphile Worker' };

/** An argument as a shell would need it written: quoted when it holds more than a word. */
function shellWord(arg) {
  return /^[\w@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replaceAll("'", "'\\''")}'`;
}

function table(header, rows) {
  const line = (cells) => `| ${cells.join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}

/** Bytes of a table or a schema: 832 KiB, 41.3 MiB. */
function formatSize(bytes) {
  if (bytes === null || bytes === undefined) return '-';
  if (bytes < 2 ** 20) return `${formatNumber(bytes / 2 ** 10)} KiB`;
  return `${formatNumber(bytes / 2 ** 20, 1)} MiB`;
}

function cpuCells(cpu) {
  const ms = (value) => (value === null || value === undefined ? '-' : formatNumber(value, 3));
  return [ms(cpu?.postgresMsPerMessage), ms(cpu?.nodeMsPerMessage)];
}

/** What this PostgreSQL does at best (floors.mjs), or undefined when the cell did not run. */
function floorsSection(floors) {
  if (floors === undefined) return undefined;
  const title = '## What this PostgreSQL does at best';
  if (floors.error !== undefined) return `${title}\n\nFAILED: ${floors.error.split('\n')[0]}`;
  const row = (what, measured) => [
    what,
    formatNumber(measured.perSecond),
    formatNumber(measured.postgresUsPerRow, 1),
  ];
  return [
    title,
    'Bare statements with no queue around them, through `pg` from one client, on a table of a ' +
      'bigint primary key and 60 bytes: no design that keeps a row per message goes faster.',
    table(
      ['statement', 'rows/s', 'PG CPU µs/row'],
      [
        row('SELECT 1, one awaited call at a time (no row)', floors.selectOne),
        row('INSERT of one row, one awaited call at a time', floors.insertOne),
        row(`INSERT of ${formatNumber(floors.batch)} rows a statement`, floors.insertBatch),
        row(`UPDATE of ${formatNumber(floors.batch)} rows by key a statement`, floors.updateBatch),
        row(`DELETE of ${formatNumber(floors.batch)} rows by key a statement`, floors.deleteBatch),
      ],
    ),
  ].join('\n\n');
}

/** The peers' results of a cell: [peer, result] with skipped and failed ones as notes. */
function rowsOf(results, key, render) {
  const byPeer = results.cells[key];
  if (byPeer === undefined) return { rows: [], notes: [] };
  const rows = [];
  const notes = [];
  for (const [peer, result] of Object.entries(byPeer)) {
    const name = PEER_NAMES[peer] ?? peer;
    if (result.skipped !== undefined) notes.push(`${name}: ${result.skipped}`);
    else if (result.error !== undefined)
      notes.push(`${name}: FAILED: ${result.error.split('\n')[0]}`);
    else {
      rows.push(render(name, result));
      if (result.note !== undefined) notes.push(`${name}: ${result.note}`);
      if (result.errors?.length > 0)
        notes.push(`${name} reported errors: ${result.errors.join('; ')}`);
      const faults = Object.entries(result.faults ?? {});
      if (faults.length > 0)
        notes.push(
          `${name} reported faults: ${faults.map(([code, n]) => `${code} × ${n}`).join(', ')}`,
        );
    }
  }
  return { rows, notes };
}

function section(title, intro, header, results, keys, render) {
  const rows = [];
  const notes = [];
  for (const key of keys) {
    const part = rowsOf(results, key, (name, result) => render(name, result, key));
    rows.push(...part.rows);
    notes.push(...part.notes);
  }
  if (rows.length === 0 && notes.length === 0) return undefined;
  return [
    `## ${title}`,
    intro,
    rows.length > 0 ? table(header, rows) : undefined,
    notes.length > 0 ? notes.map((note) => `- ${note}`).join('\n') : undefined,
  ]
    .filter((block) => block !== undefined)
    .join('\n\n');
}

const settingsText = (settings) =>
  Object.entries(settings ?? {})
    .map(([key, value]) => `${key} ${value}`)
    .join(', ');

const late = (lateness) => [
  formatMs(lateness.p50Ms),
  formatMs(lateness.p99Ms),
  formatMs(lateness.maxMs),
  String(lateness.early),
];

export function renderMarkdown(results) {
  const { meta, options } = results;
  const cpuHeader = ['PG CPU ms/msg', 'node CPU ms/msg'];
  const parts = [
    '# PostgreSQL peers: tickwheel, pg-boss and Graphile Worker',
    `${meta.date}, Node ${meta.node}, ${meta.platform}, ${meta.machine.cpus} × ${meta.machine.cpu}, ` +
      `${meta.machine.memoryGiB} GiB; PostgreSQL ${meta.postgres.version} ` +
      `(${settingsText(meta.postgres.settings)}). Load average ${formatNumber(meta.loadAverage.start, 1)} ` +
      `at the start, ${formatNumber(meta.loadAverage.end, 1)} at the end.`,
    `Peers: ${Object.entries(meta.peers)
      .map(([peer, about]) =>
        typeof about === 'string'
          ? `${PEER_NAMES[peer]} ${about}`
          : `${PEER_NAMES[peer]} ${about.version}`,
      )
      .join(
        ', ',
      )}. Command: \`node bench/postgres/run.mjs ${meta.argv.map(shellWord).join(' ')}\`.`,
    meta.notes.length > 0 ? meta.notes.map((note) => `- ${note}`).join('\n') : undefined,
    'PG CPU: every PostgreSQL server process (postmaster, backends, background workers), ' +
      'over the measured part of the cell, per message; node CPU: the cell process, which ' +
      'holds the peer, its producer and its consumer.',
    targetsSection(results),
    floorsSection(results.floors),
    section(
      'Scheduling delayed messages',
      [
        results.cells['schedule-single'] &&
          `schedule-single: ${formatNumber(options.single)} messages due in 1 h, one awaited ` +
            'call each.',
        results.cells['schedule-concurrent'] &&
          `schedule-concurrent: ${formatNumber(options.concurrent)} from ` +
            `${formatNumber(options.callers)} callers at once, each awaiting one call at a time.`,
        results.cells['schedule-batched'] &&
          `schedule-batched: ${formatNumber(options.batched)} in batches of ` +
            `${formatNumber(options.batch)} (tickwheel \`scheduleMany\`, pg-boss \`insert\`, Graphile Worker ` +
            '`addJobs`).',
      ]
        .filter(Boolean)
        .join(' '),
      ['peer', 'cell', 'msgs/s', 'WAL B/msg', ...cpuHeader],
      results,
      ['schedule-single', 'schedule-concurrent', 'schedule-batched'],
      (name, result, key) => [
        name,
        key,
        formatNumber(result.perSecond),
        formatBytes(result.walBytesPerMessage),
        ...cpuCells(result.cpu),
      ],
    ),
    section(
      `Firing lateness at ${formatNumber(options.rate)} due/s`,
      `${options.latenessSeconds} s of ${formatNumber(options.rate)} messages due a second, each ` +
        `scheduled ${options.leadMs} ms ahead (ten batches a second), consumed by the peer's ` +
        'worker in the same process. Lateness: when the handler runs minus the due time, over ' +
        'the messages delivered (a run that did not drain says so below it). CPU covers ' +
        'scheduling, delivery and completion.',
      ['peer', 'settings', 'delivered', 'p50', 'p99', 'max', 'early', ...cpuHeader],
      results,
      ['lateness (low-latency)', 'lateness (default)'],
      (name, result) => [
        name,
        `${result.mode}: ${settingsText(result.settings)}`,
        `${formatNumber(result.delivered)} / ${formatNumber(result.scheduled)}`,
        ...late(result.lateness),
        ...cpuCells(result.cpu),
      ],
    ),
    section(
      `A burst: ${formatNumber(options.burst)} due within the same second`,
      'Scheduled beforehand in batches while the consumer (low-latency settings) waits. ' +
        'Drain: from the first due time to the last delivery (the due times span 1 s of it).',
      ['peer', 'settings', 'delivered', 'drain', 'p50', 'p99', 'max', 'early', ...cpuHeader],
      results,
      ['burst'],
      (name, result) => [
        name,
        settingsText(result.settings),
        `${formatNumber(result.delivered)} / ${formatNumber(result.n)}`,
        result.drained ? formatMs(result.drainMs) : 'did not drain',
        ...late(result.lateness),
        ...cpuCells(result.cpu),
      ],
    ),
    section(
      `${formatNumber(options.pending)} pending far-future messages`,
      'Due in 30 days. Disk: pg_total_relation_size of every table of the peer’s schema ' +
        '(heap with TOAST, and indexes) after the inserts minus before, per message, measured ' +
        'as the files stand: no VACUUM and no CHECKPOINT first. Node RSS: the cell process after ' +
        'a full collection, before and after the fill (the peers keep pending messages in ' +
        'PostgreSQL only).',
      ['peer', 'disk B/msg', 'heap B/msg', 'index B/msg', 'WAL B/msg', 'node RSS', ...cpuHeader],
      results,
      ['pending'],
      (name, result) => [
        name,
        formatBytes(result.bytesPerMessage.total),
        formatBytes(result.bytesPerMessage.heap),
        formatBytes(result.bytesPerMessage.indexes),
        formatBytes(result.walBytesPerMessage),
        `${formatNumber(result.nodeRssBytes.before / 2 ** 20, 1)} → ` +
          `${formatNumber(result.nodeRssBytes.after / 2 ** 20, 1)} MiB`,
        ...cpuCells(result.cpu),
      ],
    ),
    section(
      `Soak: ${formatNumber(options.soakRate)} messages/s for ${options.soakMinutes} min`,
      'Scheduled 1 s ahead, delivered and acknowledged (low-latency consumer); the schema’s ' +
        `tables and indexes sampled every ${options.soakSampleSeconds} s. The live set is about ` +
        'one second of messages.',
      ['peer', 'delivered', 'bytes first', 'bytes last', 'bytes max', 'p99', ...cpuHeader],
      results,
      ['soak'],
      (name, result) => [
        name,
        `${formatNumber(result.delivered)} / ${formatNumber(result.scheduled)}`,
        formatSize(result.totalBytes.first),
        formatSize(result.totalBytes.last),
        formatSize(result.totalBytes.max),
        formatMs(result.lateness.p99Ms),
        ...cpuCells(result.cpu),
      ],
    ),
  ];
  return `${parts.filter((part) => part !== undefined).join('\n\n')}\n`;
}
