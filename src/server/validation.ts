/**
 * Messages for requests that do not match a route's schema. Ajv stops at the first error, and
 * for `{"paylod": 1}` that is the missing `payload`, not the misspelled key; so a missing or
 * unknown property is reported with the keys the object has that the schema does not know,
 * and the closest known name (`did you mean "payload"?`). Ajv runs with `verbose`, which puts
 * the object and its schema on each error.
 */

import type { FastifySchemaValidationError } from 'fastify';

interface VerboseError extends FastifySchemaValidationError {
  data?: unknown;
  parentSchema?: { properties?: Record<string, unknown> };
}

/** Edit distance with transpositions (optimal string alignment), case-insensitive. */
function distance(a: string, b: string): number {
  const x = a.toLowerCase();
  const y = b.toLowerCase();
  const rows: number[][] = Array.from({ length: x.length + 1 }, (_, i) =>
    Array.from({ length: y.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= x.length; i++) {
    for (let j = 1; j <= y.length; j++) {
      const cost = x[i - 1] === y[j - 1] ? 0 : 1;
      rows[i][j] = Math.min(rows[i - 1][j] + 1, rows[i][j - 1] + 1, rows[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && x[i - 1] === y[j - 2] && x[i - 2] === y[j - 1]) {
        rows[i][j] = Math.min(rows[i][j], rows[i - 2][j - 2] + 1);
      }
    }
  }
  return rows[x.length][y.length];
}

/** The known name a misspelled one most likely meant, if any is close. */
export function closest(name: string, known: readonly string[]): string | undefined {
  if (name.length > 64) return undefined;
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of known) {
    const lower = name.toLowerCase();
    const target = candidate.toLowerCase();
    // `delay` for `delayMs`, `wait` for `waitMs`: a prefix is a likely slip however short.
    const d = target.startsWith(lower) || lower.startsWith(target) ? 1 : distance(name, candidate);
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  const allowed = name.length <= 4 ? 1 : 2;
  return bestDistance <= allowed ? best : undefined;
}

function quote(name: string): string {
  return JSON.stringify(name.length > 64 ? `${name.slice(0, 64)}...` : name);
}

function unknownProperty(where: string, name: string, known: readonly string[]): string {
  const guess = closest(name, known);
  return (
    `${where} has an unknown property ${quote(name)}` +
    (guess === undefined ? '' : ` (did you mean ${quote(guess)}?)`) +
    (known.length > 0 ? `; known: ${known.join(', ')}` : '')
  );
}

function describeError(error: VerboseError, dataVar: string): string {
  const where = dataVar + (error.instancePath || '');
  const known = Object.keys(error.parentSchema?.properties ?? {});
  if (error.keyword === 'additionalProperties') {
    return unknownProperty(where, String(error.params.additionalProperty), known);
  }
  if (error.keyword === 'required') {
    const data = error.data;
    if (typeof data === 'object' && data !== null && !Array.isArray(data)) {
      const stray = Object.keys(data).find((key) => !known.includes(key));
      if (stray !== undefined) return unknownProperty(where, stray, known);
    }
    return `${where} is missing the required property ${quote(String(error.params.missingProperty))}`;
  }
  return `${where} ${error.message ?? 'is not valid'}`;
}

/** Fastify's schemaErrorFormatter. */
export function formatSchemaErrors(errors: FastifySchemaValidationError[], dataVar: string): Error {
  return new Error(errors.map((error) => describeError(error as VerboseError, dataVar)).join('; '));
}
