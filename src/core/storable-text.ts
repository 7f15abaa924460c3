import { escapePointer } from "./json-pointer.ts";

/** Postgres stores neither NUL (text, jsonb) nor unpaired UTF-16 surrogates (jsonb). */
export const isStorable = (s: string): boolean => !s.includes("\u0000") && s.isWellFormed();

/** The same text with NUL and unpaired surrogates replaced by U+FFFD: storable and printable. */
export const toStorable = (s: string): string => s.replace(/\u0000/g, "\uFFFD").toWellFormed();

/** The JSON Pointer of the first string (key or value) Postgres cannot store, or null. The pointer itself is storable. */
export function findUnstorable(value: unknown, path = ""): string | null {
  if (typeof value === "string") return isStorable(value) ? null : path;
  if (value === null || typeof value !== "object") return null;
  for (const [k, v] of Object.entries(value)) {
    const here = `${path}/${escapePointer(toStorable(k))}`;
    if (!isStorable(k)) return here;
    const inner = findUnstorable(v, here);
    if (inner !== null) return inner;
  }
  return null;
}
