/** What a misspelled name most likely meant, for every check that refuses an unknown name. */

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
