import { UsageError } from "./exit-codes.ts";

const SPAN = /^(\d+)(s|m|h|d)$/;
const SECONDS = { s: 1, m: 60, h: 3600, d: 86400 } as const;

/**
 * An instant given as RFC 3339, or as a span from now ("30m", "2h", "1d"): `direction` +1 counts
 * forward (a deadline within the next hour), -1 back (opened more than a day ago).
 */
export function parseInstant(value: string, flag: string, direction: 1 | -1, now = Date.now()): string {
  const span = SPAN.exec(value);
  if (span) return new Date(now + direction * Number(span[1]) * SECONDS[span[2] as keyof typeof SECONDS] * 1000).toISOString();
  if (/^\d{4}-\d{2}-\d{2}T/.test(value) && !Number.isNaN(Date.parse(value))) return new Date(Date.parse(value)).toISOString();
  throw new UsageError(`${flag} takes an RFC 3339 time (2026-12-01T09:00:00Z) or a span from now (30m, 2h, 1d), not "${value}"`);
}

export function parseLimit(value: string | undefined): number {
  if (value === undefined) return 50;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 500) throw new UsageError(`--limit takes a number from 1 to 500, not "${value}"`);
  return n;
}
