/**
 * A queue's schema is installed only when its stored version is not the driver's
 * (src/postgres/install.ts): SQL changed under a version already given out would never reach a
 * database that has that version. Its code (lines less blank and comment-only ones) is hashed
 * per SCHEMA_VERSION here; a change of code takes a new version and its hash.
 */

import { describe, expect, it } from 'vitest';
import { SCHEMA_VERSION, schemaSql } from '../../src/postgres/install.js';
import { codeHash } from '../support/code-hash.js';

const CODE_HASHES: Record<number, string> = {
  10: 'be451f1aef1400b2',
  11: '0cd8310d14dd6631',
  12: '776e57585c4d32cb',
  13: '9edd471b3e0b9062',
  14: '2806185d8c50a91c',
  15: '83007551b5443fca',
  16: '8eb6c165581f3c72',
  17: '738580213f10b214',
  18: 'ce27db9aa928b0a6',
  19: '6152656e4376b15b',
  20: 'e1b1773a11a14c3b',
  21: 'de54d6b46a51fd35',
  22: 'eda29848291a2cce',
};

describe('the PostgreSQL schema', () => {
  it('changes its code only with a new SCHEMA_VERSION', () => {
    const hash = codeHash(schemaSql('tickwheel_q', 'tickwheel_q'));
    const recorded = CODE_HASHES[SCHEMA_VERSION];
    const advice =
      recorded === undefined
        ? `record version ${SCHEMA_VERSION}'s hash in CODE_HASHES here: '${hash}'`
        : `the SQL changed under version ${SCHEMA_VERSION}: bump SCHEMA_VERSION in ` +
          `src/postgres/install.ts and record the new version's hash here: '${hash}'`;
    expect(hash, advice).toBe(recorded);
  });
});
