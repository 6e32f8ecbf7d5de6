/**
 * The PromQL expressions of deploy/grafana/tickwheel.json and deploy/prometheus/alerts.yml, the
 * metric names they select, and which of those a /metrics scrape lacks.
 */

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export function readRepoFile(path: string): string {
  return readFileSync(`${ROOT}${path}`, 'utf8');
}

/** Words of PromQL that are not metric names where they stand. */
const KEYWORDS = new Set(['and', 'or', 'unless', 'bool', 'offset', 'group_left', 'group_right']);

/**
 * The metric names an expression selects. Strings, label matchers and ranges are dropped, then
 * the grouping clauses (their label lists), then function calls: what is left standing as an
 * identifier is a metric name.
 */
export function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = new Set<string>();
  for (const match of bare.matchAll(/(?<![\w$.])([a-zA-Z_:][\w:]*)(\s*\()?/g)) {
    const [, name, call] = match;
    if (call === undefined && !KEYWORDS.has(name)) names.add(name);
  }
  return [...names];
}

/** The `expr`s of the dashboard's panels, and the selectors of its label_values() variables. */
export function dashboardExprs(): string[] {
  const dashboard = JSON.parse(readRepoFile('deploy/grafana/tickwheel.json')) as {
    panels: Array<{ targets?: Array<{ expr: string }> }>;
    templating: { list: Array<{ definition?: string }> };
  };
  const exprs = dashboard.panels.flatMap((panel) => (panel.targets ?? []).map((t) => t.expr));
  for (const variable of dashboard.templating.list) {
    const selector = /^label_values\((.*),\s*\w+\)$/.exec(variable.definition ?? '');
    if (selector !== null) exprs.push(selector[1]);
  }
  return exprs;
}

/** The `expr`s of a rules file: one-line, or a block scalar (`expr: |`) of deeper lines. */
export function ruleExprs(path = 'deploy/prometheus/alerts.yml'): string[] {
  const lines = readRepoFile(path).split('\n');
  const indentOf = (line: string) => line.length - line.trimStart().length;
  const exprs: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const match = /^(\s*)(?:- )?expr:\s*(.*)$/.exec(lines[i]);
    if (match === null) continue;
    const [, indent, rest] = match;
    if (!/^[|>][-+]?$/.test(rest)) {
      exprs.push(rest);
      continue;
    }
    const block: string[] = [];
    while (
      i + 1 < lines.length &&
      (lines[i + 1].trim() === '' || indentOf(lines[i + 1]) > indent.length)
    ) {
      block.push(lines[++i]);
    }
    exprs.push(block.join('\n'));
  }
  return exprs;
}

/** The families of a scrape by their type (`# TYPE name type`). */
export function families(scrape: string): Map<string, string> {
  const types = new Map<string, string>();
  for (const match of scrape.matchAll(/^# TYPE (\S+) (\S+)$/gm)) types.set(match[1], match[2]);
  return types;
}

/** Whether `name` is a family of the scrape, or a series of one of its histograms or summaries. */
export function exists(name: string, types: Map<string, string>): boolean {
  if (types.has(name)) return true;
  const series = /^(.*)_(bucket|sum|count)$/.exec(name);
  if (series === null) return false;
  const type = types.get(series[1]);
  return series[2] === 'bucket' ? type === 'histogram' : type === 'histogram' || type === 'summary';
}

/**
 * The names the expressions select that the scrape lacks, each with its expression; `known`
 * says which other names exist anyway (series of Prometheus's own, or of another backend).
 */
export function missingNames(
  exprs: string[],
  scrape: string,
  known: (name: string) => boolean = () => false,
): string[] {
  const types = families(scrape);
  const missing: string[] = [];
  for (const expr of exprs) {
    for (const name of metricNames(expr)) {
      if (!exists(name, types) && !known(name)) missing.push(`${name} (in ${expr.trim()})`);
    }
  }
  return missing;
}
