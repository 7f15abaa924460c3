import { CronExpressionParser } from "cron-parser";

export type TimerSpec = { delay_s: number } | { at: string } | { cron: string; timezone?: string };

/** Whether `tz` is an IANA time zone this runtime knows. */
export function isTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

/** A problem with a cron expression, or null when it parses. */
export function cronProblem(expression: string, timezone = "UTC"): string | null {
  if (!isTimeZone(timezone)) return `unknown time zone '${timezone}'`;
  try {
    CronExpressionParser.parse(expression, { tz: timezone });
    return null;
  } catch (err) {
    return `invalid cron expression: ${(err as Error).message}`;
  }
}

/**
 * The next time a cron timer fires after `now`, in its time zone (DST-correct: a local time
 * skipped by a spring-forward fires at the next valid instant; a repeated one fires once).
 */
export function nextCronTime(expression: string, timezone: string | undefined, now: Date): Date {
  return CronExpressionParser.parse(expression, { currentDate: now, tz: timezone ?? "UTC" }).next().toDate();
}
