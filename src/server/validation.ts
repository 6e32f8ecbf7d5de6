/**
 * Messages for requests that do not match a route's schema. Ajv stops at the first error, which
 * for `{"paylod": 1}` is the missing `payload`; so a missing or unknown property is reported
 * with the unknown key and the closest known name. Ajv's `verbose` puts the data on each error.
 */

import type { FastifySchemaValidationError } from 'fastify';
import { ID_PATTERN, TOPIC_PATTERN } from '../queue/message.js';
import { closest } from '../spelling.js';
import { COUNT_PATTERN, PAGE_SIZE_PATTERN } from './schemas/common.js';

interface VerboseError extends FastifySchemaValidationError {
  data?: unknown;
  parentSchema?: { properties?: Record<string, unknown>; pattern?: string };
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
  const rule = NAME_RULES.get(error.parentSchema?.pattern ?? '');
  if (rule !== undefined && ['pattern', 'maxLength', 'minLength'].includes(error.keyword)) {
    return `${where} must be ${rule}; got ${quote(String(error.data))}`;
  }
  return `${where} ${error.message ?? 'is not valid'}`;
}

/** Names the API refuses by a pattern, said in words rather than as the regular expression. */
const NAME_RULES = new Map([
  [
    TOPIC_PATTERN.source,
    "1-128 characters of letters, digits, '.', '_', ':' or '-', starting with a letter or digit",
  ],
  [ID_PATTERN.source, "1-200 characters of letters, digits, '.', '_', ':', '@' or '-'"],
  [PAGE_SIZE_PATTERN, 'a whole number from 1 to 1000'],
  [COUNT_PATTERN, 'a whole number from 0 to 1000'],
]);

/** Fastify's schemaErrorFormatter. */
export function formatSchemaErrors(errors: FastifySchemaValidationError[], dataVar: string): Error {
  return new Error(errors.map((error) => describeError(error as VerboseError, dataVar)).join('; '));
}
