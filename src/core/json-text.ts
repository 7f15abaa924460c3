/**
 * Payloads are stored as the exact JSON text received. To put one inside a response we parse it
 * with a reviver that keeps every number whose text would not survive a JS round trip
 * (2^53+1, 1.0, 1e400) as raw JSON, so JSON.stringify writes the original digits back.
 */
type ReviverContext = { source?: string };
type RawJson = (text: string) => unknown;
const rawJSON = (JSON as unknown as { rawJSON?: RawJson }).rawJSON;

function keepNumberText(this: unknown, _key: string, value: unknown, context?: ReviverContext): unknown {
  if (typeof value === "number" && rawJSON && context?.source !== undefined && String(value) !== context.source) {
    return rawJSON(context.source);
  }
  return value;
}

export function parseJsonText(text: string): unknown {
  return JSON.parse(text, keepNumberText as (key: string, value: unknown) => unknown);
}

/** Depth of nested arrays and objects in a JSON value, stopping early past `limit`. */
export function jsonDepthExceeds(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (inString) {
      if (ch === 92 /* \ */) i++;
      else if (ch === 34 /* " */) inString = false;
    } else if (ch === 34) inString = true;
    else if (ch === 123 || ch === 91) {
      if (++depth > limit) return true;
    } else if (ch === 125 || ch === 93) depth--;
  }
  return false;
}
