/**
 * What start-up lines and error messages show of a connection string: never its password,
 * wherever pg or a Redis client would read one from.
 */

import { describe, expect, it } from 'vitest';
import { hidePassword } from '../src/validate.js';

describe('hidePassword', () => {
  it('stars the password of the user info', () => {
    expect(hidePassword('postgres://app:s3cret@db:5432/app')).toBe(
      'postgres://app:***@db:5432/app',
    );
    expect(hidePassword('redis://:s3cret@cache/0')).toBe('redis://:***@cache/0');
  });

  it('stars a password holding an unescaped @ whole, as pg reads it', () => {
    expect(hidePassword('postgres://app:p@ss@db/app')).toBe('postgres://app:***@db/app');
  });

  it('stars a password given as a query parameter', () => {
    expect(hidePassword('postgres://db/app?user=app&password=s3cret&sslmode=disable')).toBe(
      'postgres://db/app?user=app&password=***&sslmode=disable',
    );
    expect(hidePassword('postgres://db/app?sslpassword=s3cret')).toBe(
      'postgres://db/app?sslpassword=***',
    );
  });

  it('stars each URL of a list', () => {
    expect(hidePassword('redis://a:one@h1:6379/0,redis://b:two@h2:6379/0')).toBe(
      'redis://a:***@h1:6379/0,redis://b:***@h2:6379/0',
    );
  });

  it('leaves a URL without a password as it is', () => {
    expect(hidePassword('postgres://app@db:5432/app?sslmode=require')).toBe(
      'postgres://app@db:5432/app?sslmode=require',
    );
  });
});
