import type { Deps } from "../deps.ts";
import { countDeadLetters, countFailingDeliveries, countOpenWaitsBySignal, countOpenWaitsDue, countResolvedWaits, type BucketCount } from "./overview.queries.ts";

/** Signal names listed with their open waits; the rest are summed as "others". */
const SIGNALS_LISTED = 20;
export const CHART_SERIES = ["received", "timed_out", "cancelled", "dead_letter"] as const;
export type ChartSeries = (typeof CHART_SERIES)[number];

/** A window of time cut into equal buckets, oldest first, each with a count per series. */
export interface TimeChart {
  from: string;
  bucketS: number;
  buckets: Array<Record<ChartSeries, number>>;
}

export interface Overview {
  at: string;
  openWaits: { total: number; bySignal: Array<{ signal: string; n: number }>; others: { names: number; n: number } };
  dueWithinHour: number;
  last24h: Record<ChartSeries, number>;
  deliveries: { failed: number; pending: number };
  lastHour: TimeChart;
  lastDay: TimeChart;
}

/** The console's overview: counts and two time charts, each from an indexed read. */
export async function getOverview(deps: Pick<Deps, "db">, now: Date = new Date()): Promise<Overview> {
  const hourAgo = new Date(now.getTime() - 3600_000);
  const dayAgo = new Date(now.getTime() - 86400_000);
  const [bySignal, due, resolvedDay, deadDay, resolvedHour, deadHour, deliveries] = await Promise.all([
    countOpenWaitsBySignal(deps.db, SIGNALS_LISTED),
    countOpenWaitsDue(deps.db, now, new Date(now.getTime() + 3600_000)),
    countResolvedWaits(deps.db, dayAgo, now, 3600),
    countDeadLetters(deps.db, dayAgo, now, 3600),
    countResolvedWaits(deps.db, hourAgo, now, 300),
    countDeadLetters(deps.db, hourAgo, now, 300),
    countFailingDeliveries(deps.db),
  ]);
  const lastDay = chart(dayAgo, 3600, 24, [...resolvedDay, ...deadDay]);
  const last24h = Object.fromEntries(CHART_SERIES.map((s) => [s, lastDay.buckets.reduce((sum, b) => sum + b[s], 0)])) as Record<ChartSeries, number>;
  const others = bySignal.total - bySignal.top.reduce((sum, r) => sum + r.n, 0);
  return {
    at: now.toISOString(),
    openWaits: { total: bySignal.total, bySignal: bySignal.top, others: { names: bySignal.names - bySignal.top.length, n: others } },
    dueWithinHour: due,
    last24h,
    deliveries,
    lastHour: chart(hourAgo, 300, 12, [...resolvedHour, ...deadHour]),
    lastDay,
  };
}

function chart(from: Date, bucketS: number, count: number, counts: BucketCount[]): TimeChart {
  const buckets = Array.from({ length: count }, () => Object.fromEntries(CHART_SERIES.map((s) => [s, 0])) as Record<ChartSeries, number>);
  for (const c of counts) {
    const b = buckets[Math.min(count - 1, Math.max(0, c.bucket))];
    if (b && (CHART_SERIES as readonly string[]).includes(c.series)) b[c.series as ChartSeries] += c.n;
  }
  return { from: from.toISOString(), bucketS, buckets };
}
