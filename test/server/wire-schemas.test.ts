/**
 * The wire types and the route schemas cannot drift apart: wire-schemas.types.ts states, for
 * each body the server reads or sends, that the type its schema describes is the wire type,
 * and this test compiles it. A failure names the pair that differs.
 */

import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { typeErrors } from '../support/type-errors.js';

const TYPES = fileURLToPath(new URL('./wire-schemas.types.ts', import.meta.url));

describe('the wire types', () => {
  it('are exactly the types the route schemas describe, request and response bodies', () => {
    expect(typeErrors(TYPES)).toEqual([]);
  });
});
