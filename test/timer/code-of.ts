/** What `fn` throws, as `{ name, code }`, or 'did not throw': for tests of refused input. */
export function codeOf(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return { name: (err as Error).name, code: (err as { code?: unknown }).code };
  }
  return 'did not throw';
}
