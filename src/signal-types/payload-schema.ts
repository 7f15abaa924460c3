import { _, Ajv2020, str, type ErrorObject, type ValidateFunction } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { inexactNumbers } from "../core/json-text.ts";
import type { ValidationIssue } from "../core/errors.ts";
import { escapePointer, valueAt } from "../core/json-pointer.ts";
import { laxRegExp, linearRegExp, patternProblem } from "./linear-regexp.ts";

/** Schemas arrive at runtime from callers, so they are untrusted: bounded, local, no $data. */
const MAX_SCHEMA_BYTES = 64 * 1024;
const MAX_SCHEMA_DEPTH = 32;
export const MAX_VALIDATION_ERRORS = 20;

/**
 * Fail closed: an unknown keyword (a typo such as `maxLenght`) or an unknown `format` is refused
 * at declaration rather than silently ignored, and known formats are checked. The other strict
 * checks stay off so ordinary client schemas (union types, `required` without `properties`,
 * loose tuples) still pass. `lax` only serves schemas stored before this policy (see below).
 */
function newAjv(lax = false): Ajv2020 {
  const ajv = new Ajv2020({
    allErrors: true,
    strict: false,
    strictSchema: !lax,
    strictNumbers: true,
    strictTypes: false,
    strictTuples: false,
    strictRequired: false,
    $data: false,
    addUsedSchema: false,
    loadSchema: undefined,
    validateFormats: true,
    // Patterns mean what they do in ECMAScript with the `u` flag, but run on RE2, in linear time.
    unicodeRegExp: true,
    code: { regExp: lax ? laxRegExp : linearRegExp },
    // Otherwise ajv refuses a property that a patternProperties key also matches (valid JSON
    // Schema), testing each key against each name with V8's backtracking RegExp at compile time.
    allowMatchingProperties: true,
    logger: false,
    // A payload is parsed JSON: its properties are its own. Otherwise `required: ["constructor"]`
    // is met by Object.prototype's, and an absent optional `toString` is checked as a function.
    ownProperties: true,
    // Compile each referenced subschema once, as a function. Inlined (ajv's default), a ref-free
    // subschema is copied into the code at every $ref: 100 refs to a 300-property $def made 37 MB
    // of code and 16 s of compiling; 1000 ran out of memory.
    inlineRefs: false,
  });
  // "fast" mode: the formats' own regular expressions are the simple, linear ones.
  addFormats.default(ajv, { mode: "fast" });
  // ajv's own multipleOf divides doubles: 19.99 % 0.01 is not 0, so 19.99 was no multiple of 0.01.
  ajv.removeKeyword("multipleOf");
  ajv.addKeyword({
    keyword: "multipleOf",
    type: "number",
    schemaType: "number",
    errors: false,
    error: { message: ({ schemaCode }) => str`must be multiple of ${schemaCode}`, params: ({ schemaCode }) => _`{multipleOf: ${schemaCode}}` },
    validate: (divisor: number, value: number) => isDecimalMultiple(value, divisor),
  });
  return ajv;
}

/**
 * Whether `value` divided by `divisor` is an integer, in decimal, as JSON Schema means it (a JSON
 * number is a decimal). Each side is taken as its shortest decimal text, which is the text the
 * sender wrote: where a schema has multipleOf, a number a double does not keep is refused
 * (validatePayload).
 */
function isDecimalMultiple(value: number, divisor: number): boolean {
  if (!Number.isFinite(value) || !Number.isFinite(divisor) || divisor <= 0) return false;
  const v = decimalOf(value);
  const d = decimalOf(divisor);
  const shift = v.exponent - d.exponent;
  return shift >= 0 ? (v.digits * 10n ** BigInt(shift)) % d.digits === 0n : v.digits % (d.digits * 10n ** BigInt(-shift)) === 0n;
}

/** |x| as digits × 10^exponent, from its shortest decimal text (1e+308, 1.5e-7, 19.99). */
function decimalOf(x: number): { digits: bigint; exponent: number } {
  const [, int = "0", frac = "", exp = "0"] = /^-?(\d+)(?:\.(\d+))?(?:e([+-]\d+))?$/.exec(String(x)) ?? [];
  return { digits: BigInt(int + frac), exponent: Number(exp) - frac.length };
}

const ajv = newAjv();
let laxAjv: Ajv2020 | undefined;
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
  const huge = findNonFiniteNumber(schema, "/schema");
  if (huge) return [huge];
  const refs = findRemoteRef(schema, "/schema");
  if (refs) return [refs];
  const unique = findQuadraticUniqueItems(schema, "/schema");
  if (unique) return [unique];
  const expansion = findRefExpansion(schema);
  if (expansion) return [expansion];
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
    try {
      fn = ajv.compile(schema as object);
    } catch {
      // Declared before unknown keywords, formats and patterns RE2 cannot run were refused:
      // validate as it was then (unknown keywords ignored) rather than fail every signal with a 500.
      fn = (laxAjv ??= newAjv(true)).compile(schema as object);
    }
    if (cache.size > 1000) cache.clear();
    cache.set(key, fn);
  }
  return fn;
}

/**
 * Validates a payload (parsed from `text`). Payloads are stored as the exact text received, so
 * where the schema bounds numbers, a number with more digits than the parsed value keeps is
 * refused: `100.0000000000000000001` would pass `maximum: 100` as 100 and be stored above it.
 */
export function validatePayload(schema: unknown, payload: unknown, text: string): ValidationIssue[] {
  const validate = payloadValidator(schema);
  if (!validate) return [];
  const issues = validate(payload) ? [] : (validate.errors ?? []).slice(0, MAX_VALIDATION_ERRORS).map(toIssue);
  if (boundsNumbers(schema)) {
    for (const path of inexactNumbers(text)) issues.push({ path, message: "has more digits than can be checked exactly against the schema's numeric bounds" });
  }
  return issues.slice(0, MAX_VALIDATION_ERRORS);
}

const NUMERIC_BOUNDS = /"(minimum|maximum|exclusiveMinimum|exclusiveMaximum|multipleOf)"\s*:/;
/** Whether a schema bounds numbers anywhere (a keyword in its text is enough: a false positive only checks more). */
const boundsNumbers = (schema: unknown) => NUMERIC_BOUNDS.test(JSON.stringify(schema));

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

const MAX_PATTERN_CHARS = 1000;

function unsafePattern(source: string): string | null {
  if (source.length > MAX_PATTERN_CHARS) return `pattern is too long (max ${MAX_PATTERN_CHARS} characters)`;
  return patternProblem(source);
}

function findUnsafePattern(value: unknown, path: string): ValidationIssue | null {
  if (value === null || typeof value !== "object") return null;
  for (const [k, v] of Object.entries(value)) {
    const here = `${path}/${escapePointer(k)}`;
    if (k === "pattern" && typeof v === "string") {
      const problem = unsafePattern(v);
      if (problem) return { path: here, message: problem };
    }
    if (k === "patternProperties" && v && typeof v === "object") {
      for (const p of Object.keys(v)) {
        const problem = unsafePattern(p);
        if (problem) return { path: `${here}/${escapePointer(p)}`, message: problem };
      }
    }
    const inner = findUnsafePattern(v, here);
    if (inner) return inner;
  }
  return null;
}

const SCALAR_TYPES = new Set(["string", "number", "integer", "boolean", "null"]);

/** Keywords whose value maps names to schemas (a key there is a name, not a keyword). */
const NAME_MAPS = new Set(["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"]);
/** Keywords whose value is data, not schema. */
const DATA_KEYWORDS = new Set(["enum", "const", "examples", "default"]);

/**
 * `uniqueItems: true` compares every pair of items (quadratic: 10 000 objects take seconds, a
 * 1 MiB body minutes) unless `items` declares scalar types, where ajv uses a hash. `maxItems`
 * does not bound it: with allErrors every keyword runs. So it is allowed only over scalar
 * items, or over a closed tuple (prefixItems with items: false).
 */
function findQuadraticUniqueItems(value: unknown, path: string, inNameMap = false): ValidationIssue | null {
  if (value === null || typeof value !== "object") return null;
  const o = value as Record<string, unknown>;
  if (!inNameMap && !Array.isArray(o) && o.uniqueItems === true) {
    const items = o.items as { type?: unknown } | boolean | undefined;
    const types = items && typeof items === "object" ? (Array.isArray(items.type) ? items.type : [items.type]) : [];
    const scalar = types.length > 0 && types.every((t) => typeof t === "string" && SCALAR_TYPES.has(t));
    const closedTuple = items === false && Array.isArray(o.prefixItems);
    if (!scalar && !closedTuple) {
      return { path: `${path}/uniqueItems`, message: "uniqueItems needs items of a scalar type (string, number, integer, boolean, null): comparing objects or arrays is quadratic" };
    }
  }
  for (const [k, v] of Object.entries(o)) {
    if (!inNameMap && DATA_KEYWORDS.has(k)) continue;
    const inner = findQuadraticUniqueItems(v, `${path}/${escapePointer(k)}`, !inNameMap && NAME_MAPS.has(k));
    if (inner) return inner;
  }
  return null;
}

/**
 * A number out of double range (`1e400`) parses as Infinity, which JSON (and so the stored
 * schema) writes as null: `const: 1e400` would be kept as `const: null`. Refused, naming it.
 */
function findNonFiniteNumber(value: unknown, path: string): ValidationIssue | null {
  if (typeof value === "number" && !Number.isFinite(value)) return { path, message: "is a number out of the range a 64-bit float holds" };
  if (value === null || typeof value !== "object") return null;
  for (const [k, v] of Object.entries(value)) {
    const inner = findNonFiniteNumber(v, `${path}/${escapePointer(k)}`);
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

/**
 * Local references let a small schema stand for a huge one: a value is checked against the whole
 * subschema behind every $ref, so 1000 refs to a 300-property $def are 300 000 checks (and as many
 * errors) per signal, and a 2 KB chain of 7 $defs with 10 refs each is 10^7. So the schema with
 * every reference written out must stay within what the size cap allows anyway (a value takes at
 * least two bytes, so only references can exceed this). And a reference may not lead back into
 * itself: with two such references the work doubles at each level of the payload's nesting.
 */
const MAX_EXPANDED_VALUES = MAX_SCHEMA_BYTES / 2;
/** Schemas here are applied only where a $ref names them, so they count there. */
const DEFINITIONS = new Set(["$defs", "definitions"]);

function findRefExpansion(root: unknown): ValidationIssue | null {
  if (root === null || typeof root !== "object") return null;
  // Where each object is, and the resource ($id, else the root) its references resolve against.
  const where = new Map<object, { path: string; resource: object }>();
  const anchors = new Map<string, object[]>();
  const index = (node: object, path: string, resource: object, inNameMap: boolean) => {
    const o = node as Record<string, unknown>;
    if (!inNameMap && !Array.isArray(o) && typeof o.$id === "string") resource = node;
    where.set(node, { path, resource });
    for (const [k, v] of Object.entries(o)) {
      if (!inNameMap && DATA_KEYWORDS.has(k)) continue;
      if (!inNameMap && (k === "$anchor" || k === "$dynamicAnchor") && typeof v === "string") anchors.set(v, [...(anchors.get(v) ?? []), node]);
      if (v !== null && typeof v === "object") index(v, `${path}/${escapePointer(k)}`, resource, !inNameMap && NAME_MAPS.has(k));
    }
  };
  index(root, "/schema", root, false);

  // A schema's targets: the one its JSON Pointer names, or every schema with that anchor.
  const targets = (ref: string, resource: object): object[] => {
    let fragment: string;
    try {
      fragment = decodeURIComponent(ref.slice(1));
    } catch {
      return []; // unresolvable: ajv refuses it
    }
    if (fragment !== "" && !fragment.startsWith("/")) return anchors.get(fragment) ?? [];
    const target = valueAt(resource, fragment);
    return target !== null && typeof target === "object" ? [target] : [];
  };

  const sizes = new Map<object, number>();
  const open = new Set<object>(); // objects being counted: a reference to one of them is a cycle
  let recursive: ValidationIssue | null = null;
  const size = (node: unknown, inNameMap: boolean): number => {
    if (node === null || typeof node !== "object") return 1;
    const known = sizes.get(node);
    if (known !== undefined) return known;
    open.add(node);
    let total = 1;
    for (const [k, v] of Object.entries(node)) {
      if (recursive || total > MAX_EXPANDED_VALUES) break;
      if (!inNameMap && (DATA_KEYWORDS.has(k) || DEFINITIONS.has(k))) {
        total++;
        continue;
      }
      total += size(v, !inNameMap && NAME_MAPS.has(k));
      if (!inNameMap && (k === "$ref" || k === "$dynamicRef") && typeof v === "string") {
        const { path, resource } = where.get(node)!;
        for (const target of targets(v, resource)) {
          if (open.has(target)) recursive ??= { path: `${path}/${escapePointer(k)}`, message: "$ref must not be recursive (lead back to a schema that contains it)" };
          else total += size(target, false);
        }
      }
    }
    open.delete(node);
    sizes.set(node, total);
    return total;
  };
  const total = size(root, false);
  if (recursive) return recursive;
  if (total > MAX_EXPANDED_VALUES) {
    return { path: "/schema", message: `must not expand to more than ${MAX_EXPANDED_VALUES} values with each $ref written out in full` };
  }
  return null;
}
