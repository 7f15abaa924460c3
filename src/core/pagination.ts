import { BadRequestError } from "../core/errors.ts";

export const DEFAULT_LIMIT = 50;
export const MAX_LIMIT = 500;

export interface Position {
  at: Date;
  id: string;
}

/** Cursors are opaque to clients: base64url of [timestamp, id] of the last item served. */
export function encodeCursor(p: Position): string {
  return Buffer.from(JSON.stringify([p.at.toISOString(), p.id])).toString("base64url");
}

const CURSOR_AT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const CURSOR_ID = /^[a-z]{2}_[0-9a-z]{1,64}$/;

export function decodeCursor(cursor: string | undefined): Position | undefined {
  if (cursor === undefined) return undefined;
  const invalid = () => new BadRequestError("the cursor is not one this server handed out", [{ path: "/cursor", message: "is invalid" }]);
  if (!/^[A-Za-z0-9_-]{1,400}$/.test(cursor)) throw invalid();
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
  } catch {
    throw invalid();
  }
  if (!Array.isArray(value) || value.length !== 2 || typeof value[0] !== "string" || typeof value[1] !== "string") throw invalid();
  // Exactly what encodeCursor writes: an ISO instant Postgres can hold, and an id (prefix_base32).
  if (!CURSOR_AT.test(value[0]) || value[0].startsWith("0000") || !CURSOR_ID.test(value[1])) throw invalid();
  const at = new Date(value[0]);
  if (Number.isNaN(at.getTime())) throw invalid();
  return { at, id: value[1] };
}

/** Splits a limit+1 fetch into the page and the cursor of the next one. */
export function page<T, R>(rows: T[], limit: number, position: (row: T) => Position, render: (row: T) => R) {
  const more = rows.length > limit;
  const items = more ? rows.slice(0, limit) : rows;
  const last = items[items.length - 1];
  return { items: items.map(render), next_cursor: more && last ? encodeCursor(position(last)) : null };
}
