import { RE2JS } from "re2js";

/**
 * The regular-expression engine ajv runs `pattern` and `patternProperties` with. V8 matches by
 * backtracking, and not only nested quantifiers blow up: `^\w+\s?\w+$` took 19 s of event loop
 * on one 150 000-character string. RE2 matches in time linear in the string whatever the
 * pattern; re2js is a pure-JavaScript port (nothing to compile at install). JSON Schema
 * patterns are ECMAScript syntax, read with the `u` flag as ajv does, so each pattern is first
 * checked by V8 and then translated where RE2 reads the same text differently.
 */
export function linearRegExp(pattern: string): { test(s: string): boolean; toString(): string } {
  new RegExp(pattern, "u"); // throws on what ECMAScript does not accept, such as RE2's (?i) or \A
  const re2 = RE2JS.compile(toRe2(pattern));
  // ajv keys compiled patterns by toString(): it must differ between patterns.
  return { test: (s) => re2.test(s), toString: () => `/${pattern}/u` };
}
// ajv names the engine by this in standalone code; our validators are compiled in process.
linearRegExp.code = "linearRegExp";

/**
 * For schemas stored before patterns were checked: a backreference or lookaround RE2 cannot run
 * still runs on V8 as it did then, rather than fail every signal of the type.
 */
export function laxRegExp(pattern: string): { test(s: string): boolean; toString(): string } {
  try {
    return linearRegExp(pattern);
  } catch {
    return new RegExp(pattern, "u");
  }
}
laxRegExp.code = "laxRegExp";

/** A valid ECMAScript pattern that RE2 cannot run; the message says why. */
class UnsupportedPattern extends Error {}

/**
 * Linear, but in the string's length times the live states of the pattern's program: where the
 * DFA gives up, as on [ab]*a[ab]{194}$ (200 instructions), a 1 MiB string takes 2.3 s, and a
 * 600-character pattern can make 58 000 instructions (1 000 s per MiB). Ordinary patterns are far
 * smaller: a UUID is 40, a semantic version 67, ^[a-z0-9_]{3,64}$ 129.
 */
const MAX_PROGRAM_SIZE = 200;

/** Why `pattern` cannot be a schema's pattern, or null when it can. */
export function patternProblem(pattern: string): string | null {
  try {
    new RegExp(pattern, "u");
  } catch (err) {
    return `pattern is not a valid regular expression: ${(err as Error).message}`;
  }
  let size: number;
  try {
    size = RE2JS.compile(toRe2(pattern)).programSize();
  } catch (err) {
    if (err instanceof UnsupportedPattern) return `pattern ${err.message}`;
    return `pattern cannot be run by the linear-time engine (RE2): ${(err as Error).message}`;
  }
  if (size > MAX_PROGRAM_SIZE) {
    return `pattern is too complex (${size} RE2 instructions, at most ${MAX_PROGRAM_SIZE}); long {m,n} repeats are the usual cause: bound lengths with minLength and maxLength instead`;
  }
  return null;
}

/** ECMAScript's \s: white space and line terminators (RE2's \s is only [\t\n\f\r ]). */
const SPACES: Array<[number, number]> = [
  [0x09, 0x0d], [0x20, 0x20], [0xa0, 0xa0], [0x1680, 0x1680], [0x2000, 0x200a], [0x2028, 0x2029],
  [0x202f, 0x202f], [0x205f, 0x205f], [0x3000, 0x3000], [0xfeff, 0xfeff],
];
const hex = (cp: number) => `\\x{${cp.toString(16)}}`;
const rangesText = (ranges: Array<[number, number]>) => ranges.map(([a, b]) => (a === b ? hex(a) : `${hex(a)}-${hex(b)}`)).join("");
const SPACE = rangesText(SPACES);
/** \S inside a class cannot be written as [^…] there, so as the ranges between the spaces. */
const NOT_SPACE = rangesText(
  [...SPACES, [0x110000, 0x110000] as [number, number]]
    .map(([a], i, all): [number, number] => [i === 0 ? 0 : all[i - 1]![1] + 1, a - 1])
    .filter(([a, b]) => a <= b),
);
/** ECMAScript's `.` (without the s flag): anything but a line terminator (RE2's: but \n). */
const DOT = "[^\\n\\r\\x{2028}\\x{2029}]";

const BACKREFERENCE = "uses a backreference (\\1, \\k<name>), which cannot be matched in linear time";
const LOOKAROUND = "uses a lookahead or lookbehind ((?=, (?!, (?<=, (?<!), which cannot be matched in linear time";

/**
 * RE2 syntax with the meaning `source` has in ECMAScript with the u flag. Expects a pattern V8
 * accepts with the u flag (so no stray `{`, `]` or identity escapes). Named groups become plain
 * groups (only whether it matches is asked); `[` inside a class is escaped (RE2 would read
 * `[[:alpha:]]` as a POSIX class); `[]` and `[^]` match nothing and anything.
 */
export function toRe2(source: string): string {
  let out = "";
  let inClass = false;
  for (let i = 0; i < source.length; i++) {
    const ch = source[i]!;
    if (ch === "\\") {
      const [text, length] = translateEscape(source, i, inClass);
      out += text;
      i += length - 1;
    } else if (inClass) {
      if (ch === "]") inClass = false;
      out += ch === "[" ? "\\[" : ch;
    } else if (ch === "[") {
      if (source.startsWith("[]", i)) (out += "[^\\x{0}-\\x{10ffff}]"), (i += 1);
      else if (source.startsWith("[^]", i)) (out += "[\\x{0}-\\x{10ffff}]"), (i += 2);
      else {
        inClass = true;
        out += "[";
        if (source[i + 1] === "^") (out += "^"), i++;
      }
    } else if (ch === ".") {
      out += DOT;
    } else if (ch === "(" && source[i + 1] === "?") {
      const next = source[i + 2];
      const lookbehind = next === "<" && (source[i + 3] === "=" || source[i + 3] === "!");
      if (next === "=" || next === "!" || lookbehind) throw new UnsupportedPattern(LOOKAROUND);
      if (next === ":") (out += "(?:"), (i += 2);
      else if (next === "<") (out += "(?:"), (i = source.indexOf(">", i));
      // (?i:…) and the like: RE2's m and s would not mean what ECMAScript's do
      else throw new UnsupportedPattern("uses inline modifiers such as (?i:…), which are not supported");
    } else {
      out += ch;
    }
  }
  return out;
}

/** The RE2 text for the escape at `source[i]` and how many characters it took. */
function translateEscape(source: string, i: number, inClass: boolean): [string, number] {
  const c = source[i + 1]!;
  if (c >= "1" && c <= "9") throw new UnsupportedPattern(BACKREFERENCE);
  switch (c) {
    case "k":
      throw new UnsupportedPattern(BACKREFERENCE);
    case "s":
      return [inClass ? SPACE : `[${SPACE}]`, 2];
    case "S":
      return [inClass ? NOT_SPACE : `[^${SPACE}]`, 2];
    case "b":
      return [inClass ? hex(8) : "\\b", 2]; // [\b] is a backspace
    case "0":
      return [hex(0), 2];
    case "c":
      return [hex(source.charCodeAt(i + 2) % 32), 3];
    case "u": {
      if (source[i + 2] === "{") {
        const end = source.indexOf("}", i);
        return [hex(parseInt(source.slice(i + 3, end), 16)), end - i + 1];
      }
      const unit = parseInt(source.slice(i + 2, i + 6), 16);
      const low = /^\\u([dD][c-fC-F][0-9a-fA-F]{2})/.exec(source.slice(i + 6, i + 12));
      // A surrogate pair written as two escapes is one code point under the u flag.
      if (unit >= 0xd800 && unit <= 0xdbff && low) return [hex(0x10000 + ((unit - 0xd800) << 10) + (parseInt(low[1]!, 16) - 0xdc00)), 12];
      return [hex(unit), 6];
    }
    case "p":
    case "P": {
      // RE2 names a general category or script by its value alone: \p{Lu}, \p{Greek}.
      const end = source.indexOf("}", i);
      const name = source.slice(i + 3, end).replace(/^(?:General_Category|gc|Script|sc)=/, "");
      return [`\\${c}{${name}}`, end - i + 1];
    }
    default:
      // \d \D \w \W \B \t \n \v \f \r \xHH and escaped syntax characters: the same in RE2
      return [`\\${c}`, 2];
  }
}
