/** Small statistics and formatting helpers for the benchmark. */

/** Wall-clock milliseconds with sub-millisecond resolution (monotonic within this process). */
export const now = (): number => performance.timeOrigin + performance.now();

export interface Summary {
  count: number;
  p50: number;
  p99: number;
  max: number;
  min: number;
  mean: number;
}

/** Nearest-rank percentiles; NaN everywhere for an empty sample. */
export function summarize(values: number[]): Summary {
  if (values.length === 0) return { count: 0, p50: NaN, p99: NaN, max: NaN, min: NaN, mean: NaN };
  const sorted = Float64Array.from(values).sort();
  const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
  let sum = 0;
  for (const v of sorted) sum += v;
  return { count: sorted.length, p50: at(50), p99: at(99), max: sorted[sorted.length - 1]!, min: sorted[0]!, mean: sum / sorted.length };
}

export const fmtMs = (ms: number): string => (Number.isNaN(ms) ? "n/a" : Math.abs(ms) >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(1)} ms`);
export const fmtRate = (perS: number): string => (Number.isNaN(perS) ? "n/a" : perS >= 100 ? perS.toFixed(0) : perS.toFixed(1));
export const fmtRatio = (r: number): string => (Number.isNaN(r) ? "" : `${r.toFixed(3)}x`);

export const describeLatency = (s: Summary): string =>
  s.count === 0 ? "no samples" : `p50 ${fmtMs(s.p50)}, p99 ${fmtMs(s.p99)}, max ${fmtMs(s.max)} (n=${s.count})`;

/** A plain text table with left-aligned columns. */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join("  ").trimEnd();
  return [line(header), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n");
}
