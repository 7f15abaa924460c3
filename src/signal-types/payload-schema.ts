import { Ajv2020, type ErrorObject, type ValidateFunction } from "ajv/dist/2020.js";
import type { ValidationIssue } from "../core/errors.ts";
import { escapePointer } from "../core/json-pointer.ts";

/** Schemas arrive at runtime from callers, so they are untrusted: bounded, local, no $data. */
const MAX_SCHEMA_BYTES = 64 * 1024;
const MAX_SCHEMA_DEPTH = 32;
export const MAX_VALIDATION_ERRORS = 20;

function newAjv(): Ajv2020 {
  return new Ajv2020({
    allErrors: true,
    strict: false,
    $data: false,
    addUsedSchema: false,
    loadSchema: undefined,
    validateFormats: false,
    // Compile `pattern` with the `u` flag; catastrophic patterns are refused at declaration.
    unicodeRegExp: true,
  });
}

const ajv = newAjv();
const cache = new Map<string, ValidateFunction>();

/** Checks a schema at declaration; returns the problems (empty when it is usable). */
export function checkSchema(schema: unknown): ValidationIssue[] {
  if (schema === null) return [];
  if (typeof schema !== "object" && typeof schema !== "boolean") {
    return [{ path: "/schema", message: "must be a JSON Schema object, a boolean or null" }];
  }
  const text = JSON.stringify(schema);
  if (text.length > MAX_SCHEMA_BYTES) return [{ path: "/schema", message: `must be at most ${MAX_SCHEMA_BYTES} bytes` }];
  if (depthOf(schema) > MAX_SCHEMA_DEPTH) return [{ path: "/schema", message: `must nest at most ${MAX_SCHEMA_DEPTH} levels` }];
  const unsafe = findUnsafePattern(schema, "/schema");
  if (unsafe) return [unsafe];
  const refs = findRemoteRef(schema, "/schema");
  if (refs) return [refs];
  try {
    newAjv().compile(schema as object);
    return [];
  } catch (err) {
    return [{ path: "/schema", message: `invalid JSON Schema: ${(err as Error).message}` }];
  }
}

/** The compiled validator for a schema, compiled once per distinct schema text. */
export function payloadValidator(schema: unknown): ValidateFunction | null {
  if (schema === null || schema === undefined) return null;
  const key = JSON.stringify(schema);
  let fn = cache.get(key);
  if (!fn) {
    fn = ajv.compile(schema as object);
    if (cache.size > 1000) cache.clear();
    cache.set(key, fn);
  }
  return fn;
}

export function validatePayload(schema: unknown, payload: unknown): ValidationIssue[] {
  const validate = payloadValidator(schema);
  if (!validate || validate(payload)) return [];
  return (validate.errors ?? []).slice(0, MAX_VALIDATION_ERRORS).map(toIssue);
}

function toIssue(e: ErrorObject): ValidationIssue {
  if (e.keyword === "required") {
    const missing = String((e.params as { missingProperty?: string }).missingProperty ?? "");
    return { path: `${e.instancePath}/${escapePointer(missing)}`, message: "is required" };
  }
  if (e.keyword === "additionalProperties") {
    const extra = String((e.params as { additionalProperty?: string }).additionalProperty ?? "");
    return { path: `${e.instancePath}/${escapePointer(extra)}`, message: "is not allowed" };
  }
  return { path: e.instancePath, message: e.message ?? "is invalid" };
}


function depthOf(value: unknown, depth = 0): number {
  if (depth > MAX_SCHEMA_DEPTH || value === null || typeof value !== "object") return depth;
  let max = depth;
  for (const v of Object.values(value)) max = Math.max(max, depthOf(v, depth + 1));
  return max;
}

// Nested quantifiers such as (a+)+, (a*)*, (a|a)+ can backtrack exponentially; refuse them.
const NESTED_QUANTIFIER = /\((?:[^()\\]|\\.)*[+*}](?:[^()\\]|\\.)*\)\s*(?:[+*]|\{\d+,?\d*\})/;
const QUANTIFIED_ALTERNATION = /\((?:[^()\\]|\\.)*\|(?:[^()\\]|\\.)*\)\s*(?:[+*]|\{\d+,\d*\})/;

function findUnsafePattern(value: unknown, path: string): ValidationIssue | null {
  if (value === null || typeof value !== "object") return null;
  for (const [k, v] of Object.entries(value)) {
    const here = `${path}/${escapePointer(k)}`;
    if (k === "pattern" && typeof v === "string") {
      if (v.length > 1000) return { path: here, message: "pattern is too long (max 1000 characters)" };
      if (NESTED_QUANTIFIER.test(v) || QUANTIFIED_ALTERNATION.test(v)) {
        return { path: here, message: "pattern has nested or alternated quantifiers that can backtrack catastrophically" };
      }
    }
    if (k === "patternProperties" && v && typeof v === "object") {
      for (const p of Object.keys(v)) {
        if (NESTED_QUANTIFIER.test(p) || QUANTIFIED_ALTERNATION.test(p)) {
          return { path: `${here}/${escapePointer(p)}`, message: "pattern can backtrack catastrophically" };
        }
      }
    }
    const inner = findUnsafePattern(v, here);
    if (inner) return inner;
  }
  return null;
}

function findRemoteRef(value: unknown, path: string): ValidationIssue | null {
  if (value === null || typeof value !== "object") return null;
  for (const [k, v] of Object.entries(value)) {
    const here = `${path}/${escapePointer(k)}`;
    if ((k === "$ref" || k === "$dynamicRef") && typeof v === "string" && !v.startsWith("#")) {
      return { path: here, message: "only local references (#...) are allowed" };
    }
    const inner = findRemoteRef(v, here);
    if (inner) return inner;
  }
  return null;
}
