/**
 * The schedules both peers get, in a neutral form that each adapter turns into its own call
 * (tickwheel: putSchedule(name, { topic, cron, timezone, everyMs, startAt, payload });
 * BullMQ: upsertJobScheduler(id, { pattern, tz, every, startDate }, { data })).
 *
 * The mix, by i % 10 (so 10,000 schedules hold 1,000 of each):
 *   0  cron '* * * * *'             every minute        } in one of TIME_ZONES,
 *   1  cron '*\/5 * * * *'           every five minutes  } by floor(i / 10), so every
 *   2  cron 'M * * * *'             hourly              } kind is in every zone
 *   3  cron 'M H * * *'             daily               }
 *   4  cron 'M H * * 1-5'           weekdays            }
 *   5-9  everyMs 1 min, 5 min, 15 min, 1 h, 1 day (fixed intervals)
 *
 * The idle cells give every schedule the same startAt, far enough ahead that nothing comes due
 * while they run: each schedule is armed (its next occurrence made, a timer waiting) and quiet.
 */

export const TIME_ZONES = [
  'UTC',
  'Europe/Berlin',
  'America/New_York',
  'Asia/Tokyo',
  'Australia/Sydney',
  'Asia/Kolkata',
  'America/Sao_Paulo',
  'Europe/London',
];

export const INTERVALS_MS = [60_000, 300_000, 900_000, 3_600_000, 86_400_000];

export const MIX = [
  'cron every minute',
  'cron every 5 minutes',
  'cron hourly',
  'cron daily',
  'cron weekdays',
  'every 1 min',
  'every 5 min',
  'every 15 min',
  'every 1 h',
  'every 1 day',
];

export function scheduleName(i) {
  return `schedule-${i}`;
}

/** Each occurrence's payload: small JSON, the same for both peers. */
function payloadOf(i) {
  return { schedule: i, tenant: `tenant-${i % 100}`, report: 'usage' };
}

/** Schedule i of the mix, with no occurrence before `startAt` (epoch ms). */
export function mixedSpec(i, startAt) {
  const kind = i % 10;
  const payload = payloadOf(i);
  if (kind >= 5) return { everyMs: INTERVALS_MS[kind - 5], startAt, payload };
  const minute = (i * 7) % 60;
  const hour = (i * 5) % 24;
  const crons = [
    '* * * * *',
    '*/5 * * * *',
    `${minute} * * * *`,
    `${minute} ${hour} * * *`,
    `${minute} ${hour} * * 1-5`,
  ];
  return {
    cron: crons[kind],
    timezone: TIME_ZONES[Math.floor(i / 10) % TIME_ZONES.length],
    startAt,
    payload,
  };
}

/** Schedule i of the firing cell: `cron` (every minute, or every second in a quick run). */
export function firingSpec(i, cron) {
  return { cron, timezone: TIME_ZONES[i % TIME_ZONES.length], payload: payloadOf(i) };
}

/** How many schedules of each kind the first n of the mix hold. */
export function mixCounts(n) {
  const counts = {};
  for (let kind = 0; kind < MIX.length; kind++) {
    counts[MIX[kind]] = Math.floor(n / 10) + (kind < n % 10 ? 1 : 0);
  }
  return counts;
}
