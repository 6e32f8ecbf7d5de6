#!/usr/bin/env bash
# Runs two commands in turn (A B A B ...), each as a whole process, and prints each run's wall,
# user and system seconds, then the medians and the median of the A/B ratios taken pair by pair:
# a comparison that holds while a shared machine's speed drifts. What the commands print goes to
# <out>.a.log and <out>.b.log (warm-up runs first).
#
#   bench/pairs.sh [-n PAIRS] [-w WARMUP] [-o OUT] -- 'COMMAND A' 'COMMAND B'
#
# Example (pull-burst before and after, a build of another commit in /tmp/before/dist):
#   bench/pairs.sh -n 11 -o /tmp/pull -- 'node bench/queue/pull-burst.mjs --dist /tmp/before/dist' \
#     'node bench/queue/pull-burst.mjs'
set -euo pipefail

pairs=5
warmup=1
out=/tmp/pairs
while [ $# -gt 0 ]; do
  case "$1" in
    -n) pairs="$2"; shift 2 ;;
    -w) warmup="$2"; shift 2 ;;
    -o) out="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "unknown option $1 (see the top of $0)" >&2; exit 2 ;;
  esac
done
if [ $# -ne 2 ]; then
  echo "give two commands after --, each one quoted string (see the top of $0)" >&2
  exit 2
fi
a="$1"
b="$2"
: > "$out.a.log"
: > "$out.b.log"

# One run: prints "wall user sys" (seconds), the command's output appended to a log.
run() {
  local TIMEFORMAT='%R %U %S'
  { time bash -c "$1" >> "$2" 2>&1; } 2>&1
}

for ((i = 0; i < warmup; i++)); do
  run "$a" "$out.a.log" > /dev/null
  run "$b" "$out.b.log" > /dev/null
done
rows=()
for ((i = 1; i <= pairs; i++)); do
  ta=$(run "$a" "$out.a.log")
  tb=$(run "$b" "$out.b.log")
  echo "pair $i: A wall/user/sys $ta | B $tb"
  rows+=("$ta $tb")
done
printf '%s\n' "${rows[@]}" | awk '
  function median(arr, n,   i, j, t) {
    for (i = 2; i <= n; i++) { t = arr[i]; for (j = i - 1; j >= 1 && arr[j] > t; j--) arr[j + 1] = arr[j]; arr[j + 1] = t }
    return n % 2 ? arr[(n + 1) / 2] : (arr[n / 2] + arr[n / 2 + 1]) / 2
  }
  { n++; aw[n] = $1; ac[n] = $2 + $3; bw[n] = $4; bc[n] = $5 + $6
    rw[n] = $4 > 0 ? $1 / $4 : 0; rc[n] = ($5 + $6) > 0 ? ($2 + $3) / ($5 + $6) : 0 }
  END {
    printf "medians of %d pairs: A wall %.2f s cpu %.2f s | B wall %.2f s cpu %.2f s | A/B wall %.3f cpu %.3f\n",
      n, median(aw, n), median(ac, n), median(bw, n), median(bc, n), median(rw, n), median(rc, n)
  }'
