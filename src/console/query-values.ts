import { RUN_ID, SIGNAL_NAME } from "../core/names.ts";

/** A signal record's id, as src/core/ids.ts makes them. */
export const SIGNAL_ID = /^sg_[0-9a-z]{1,60}$/;

const LOCAL = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2})(:\d{2})?$/;
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/i;

/**
 * An instant from a filter: a browser's datetime-local value (no zone: read as UTC, as the
 * form says) or RFC 3339 (what the page's own links carry).
 */
export function parseInstant(text: string): Date | undefined {
  const local = LOCAL.exec(text);
  const iso = local ? `${local[1]}T${local[2]}${local[3] ?? ":00"}Z` : RFC3339.test(text) ? text : undefined;
  if (iso === undefined) return undefined;
  const at = new Date(iso);
  const year = at.getUTCFullYear();
  return Number.isNaN(at.getTime()) || year < 1970 || year > 9999 ? undefined : at;
}

/** A datetime-local input's value for an instant (UTC, to the second). */
export const toInputInstant = (at: Date | undefined) => (at ? at.toISOString().slice(0, 19) : "");

/** A filter's trimmed value; absent when empty. */
export const filterText = (params: URLSearchParams, name: string) => params.get(name)?.trim() || undefined;

/** The `signal` and `run` filters several pages share; a malformed one is named in `problems`. */
export function parseSignalAndRun(params: URLSearchParams, problems: string[]): { signal?: string; run?: string } {
  const found: { signal?: string; run?: string } = {};
  const signal = filterText(params, "signal");
  if (signal !== undefined && SIGNAL_NAME.test(signal)) found.signal = signal;
  else if (signal !== undefined) problems.push("Signal: 1 to 100 characters from A-Z a-z 0-9 . _ -, starting with a letter or digit.");
  const run = filterText(params, "run");
  if (run !== undefined && RUN_ID.test(run)) found.run = run;
  else if (run !== undefined) problems.push("Run: 1 to 200 characters from A-Z a-z 0-9 . _ : @ -.");
  return found;
}

/** `meta=key=value` filters (repeatable, all must match); a malformed one is named in `problems`. */
export function parseMetadataPairs(params: URLSearchParams, problems: string[]): Array<[string, string]> {
  const pairs: Array<[string, string]> = [];
  for (const pair of params.getAll("meta")) {
    if (pair.trim() === "") continue;
    const eq = pair.indexOf("=");
    const key = eq < 0 ? "" : pair.slice(0, eq).trim();
    if (key === "" || key.length > 200 || pair.length > 1200) problems.push(`Metadata “${pair.slice(0, 60)}”: write key=value.`);
    else pairs.push([key, pair.slice(eq + 1).trim()]);
  }
  return pairs;
}
