/** Where a command writes: stdout for results, stderr for messages (so `--json | jq` stays clean). */
export interface Output {
  out(line: string): void;
  err(line: string): void;
}

export const processOutput: Output = {
  out: (line) => void process.stdout.write(`${line}\n`),
  err: (line) => void process.stderr.write(`${line}\n`),
};

/** Rows as aligned columns under upper-case headings; the last column is not padded. */
export function table(headings: string[], rows: string[][]): string {
  const line = lineOf(headings.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length))));
  return [line(headings.map((h) => h.toUpperCase())), ...rows.map(line)].join("\n");
}

/**
 * The same table printed a row at a time, each as soon as it is known (what got done before an
 * error is on the screen): `values[i]` is every value column i can hold, the last excepted. The
 * headings come with the first row.
 */
export function rowByRow(headings: string[], values: ReadonlyArray<readonly string[]>, out: (line: string) => void): (cells: string[]) => void {
  const line = lineOf(headings.map((h, i) => Math.max(h.length, ...(values[i] ?? []).map((v) => v.length))));
  let headed = false;
  return (cells) => {
    if (!headed) out(line(headings.map((h) => h.toUpperCase())));
    headed = true;
    out(line(cells));
  };
}

function lineOf(widths: number[]): (cells: string[]) => string {
  return (cells) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd();
}

/** `key  value` lines, keys aligned: one resource shown in full. */
export function fields(pairs: Array<[string, string]>): string {
  const width = Math.max(...pairs.map(([k]) => k.length));
  return pairs.map(([k, v]) => `${k.padEnd(width)}  ${v}`.trimEnd()).join("\n");
}

/** An RFC 3339 time to the second, in UTC, with how long ago or ahead it is. */
export function when(iso: string | null | undefined, now = Date.now()): string {
  if (!iso) return "-";
  const at = Date.parse(iso);
  const seconds = Math.round((at - now) / 1000);
  const span = duration(Math.abs(seconds));
  return `${new Date(at).toISOString().replace(/\.\d{3}Z$/, "Z")} (${seconds >= 0 ? `in ${span}` : `${span} ago`})`;
}

/** Largest two units: 45s, 3m 20s, 2h 5m, 3d 4h. */
export function duration(seconds: number): string {
  const units: Array<[string, number]> = [
    ["d", 86400],
    ["h", 3600],
    ["m", 60],
    ["s", 1],
  ];
  const parts: string[] = [];
  let left = seconds;
  for (const [unit, size] of units) {
    const n = Math.floor(left / size);
    if (n > 0 || (unit === "s" && parts.length === 0)) parts.push(`${n}${unit}`);
    left -= n * size;
    if (parts.length === 2) break;
  }
  return parts.join(" ");
}

/** A value as one line of compact JSON, cut to `max` characters. */
export function compact(value: unknown, max = 60): string {
  if (value === undefined) return "-";
  const text = JSON.stringify(value);
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
