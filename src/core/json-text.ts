import { escapePointer } from "./json-pointer.ts";

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

/** The JSON value of `text` with every number as its text as written (`1.0`, `12345678901234567891`). */
export function parseNumbersAsWritten(text: string): unknown {
  return JSON.parse(text, ((_key: string, value: unknown, context?: ReviverContext) =>
    typeof value === "number" && context?.source !== undefined ? context.source : value) as (key: string, value: unknown) => unknown);
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

/** A number literal a double does not hold exactly, as found by `inexactNumbers`. */
class Inexact {
  readonly source: string;
  constructor(source: string) {
    this.source = source;
  }
}

function markInexact(this: unknown, _key: string, value: unknown, context?: ReviverContext): unknown {
  if (typeof value === "number" && context?.source !== undefined && !sameDecimal(context.source, String(value))) return new Inexact(context.source);
  return value;
}

/**
 * JSON Pointers to the numbers in `text` whose digits a 64-bit float cannot keep
 * (`100.0000000000000000001`, `1e400`, `2^53 + 1`): a check made on the parsed value is not a
 * check of those digits. `1.0`, `1e2` and `0.1` are exact in this sense: the parsed value
 * prints back as the same decimal.
 */
export function inexactNumbers(text: string): string[] {
  const found: string[] = [];
  const walk = (value: unknown, path: string) => {
    if (value instanceof Inexact) found.push(path);
    else if (value && typeof value === "object") {
      for (const [k, v] of Object.entries(value)) walk(v, `${path}/${escapePointer(k)}`);
    }
  };
  walk(JSON.parse(text, markInexact as (key: string, value: unknown) => unknown), "");
  return found;
}

/** Whether two decimal number texts denote the same value (sign, digits and exponent compared). */
function sameDecimal(a: string, b: string): boolean {
  return canonicalDecimal(a) === canonicalDecimal(b);
}

/** `0.<significant digits>e<exponent>`, the same text for every way of writing one decimal value. */
function canonicalDecimal(text: string): string {
  const m = /^(-?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/.exec(text);
  if (!m) return text; // Infinity, NaN: never equal to a JSON literal
  const [, sign, int = "", frac = "", exp = "0"] = m;
  const all = int + frac;
  const leadingZeros = all.length - all.replace(/^0+/, "").length;
  const significant = all.slice(leadingZeros).replace(/0+$/, "");
  if (significant === "") return "0";
  // The value is 0.<all> × 10^(int.length + exp); each leading zero dropped moves the point one place.
  return `${sign}0.${significant}e${BigInt(exp) + BigInt(int.length - leadingZeros)}`;
}
