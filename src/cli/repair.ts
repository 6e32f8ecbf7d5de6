/**
 * `tickwheel repair --dir D [--yes] [--json]` (docs/storage.md, Recovery): says what a damaged
 * log has lost, changing nothing (exit status 2); with --yes drops that and keeps the rest.
 */

import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { RepairReport } from '../queue/store.js';
import type { FlagsOf, OptionSpec } from './args.js';
import { CliError, type CliIo } from './io.js';

export const REPAIR_OPTIONS = [
  {
    name: 'dir',
    value: '<path>',
    description: 'data directory',
    env: 'TICKWHEEL_DIR',
    default: './data',
  },
  {
    name: 'yes',
    description: 'drop the messages that cannot be recovered (keeps every other one)',
  },
  { name: 'json', description: 'print the report as JSON' },
] as const satisfies readonly OptionSpec[];

export type RepairOptions = FlagsOf<typeof REPAIR_OPTIONS>;

export async function repair(options: RepairOptions, io: CliIo): Promise<void> {
  const dir = resolve(options.dir);
  if (!existsSync(join(dir, 'log'))) {
    throw new CliError(`no data directory at ${dir} (it has no log folder)`);
  }
  // Loaded here, so that the client commands do not load the store.
  const { DelayQueue, FileStore } = await import('../delay-queue.js');
  const { describeDamage } = await import('../store/file/damage.js');
  let report: RepairReport;
  if (options.yes === true) {
    const queue = await DelayQueue.open({ dir, repair: true });
    try {
      report = queue.recovery?.repair as RepairReport;
    } finally {
      await queue.close();
    }
  } else {
    report = await FileStore.planRepair({ dir });
  }
  if (options.json === true) io.out(`${JSON.stringify(report, null, 2)}\n`);
  else io.out(describe(dir, report, describeDamage));
  if (report.damage.length > 0 && !report.applied) {
    throw new CliError(
      `nothing was changed: run \`tickwheel repair --dir ${dir} --yes\` to drop the messages ` +
        'listed above and keep every other one',
      2,
    );
  }
}

function describe(
  dir: string,
  report: RepairReport,
  describeDamage: (damage: RepairReport['damage'][number]) => string,
): string {
  if (report.damage.length === 0) return `no damage found in ${dir}: nothing to repair\n`;
  const lines = [`${dir}: the message log is damaged`];
  for (const damage of report.damage) lines.push(`  ${describeDamage(damage)}`);
  lines.push(
    report.lost === 0
      ? 'no message is lost'
      : `${report.lost} messages cannot be recovered${report.exact ? '' : ' (at least)'}:`,
  );
  for (const { id, topic, reason } of report.dropped)
    lines.push(`  ${id} (topic ${topic}): ${reason}`);
  if (report.unnamed > 0) {
    lines.push(`  ${report.unnamed} more, whose ids were only in the damaged bytes`);
  }
  for (const note of report.notes) lines.push(`note: ${note}`);
  if (report.applied) {
    lines.push(
      `repaired: dropped ${report.lost} messages and kept every other one; this report is ` +
        `kept in ${join(dir, 'repair.json')}`,
    );
  }
  return `${lines.join('\n')}\n`;
}
