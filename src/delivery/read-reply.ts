import type { Readable } from "node:stream";
import { jsonDepthExceeds } from "../core/json-text.ts";
import { findUnstorable } from "../core/storable-text.ts";

/** A callback's JSON answer is kept as its reply up to this size; a larger one is not read on. */
export const MAX_REPLY_BYTES = 64 * 1024;
/** As intake's payloads: deeper JSON is refused before it is parsed (the parser would exhaust the stack). */
const MAX_REPLY_DEPTH = 64;

/** What a 2xx answer's body gave: its JSON (`value`), or why it is not kept (`note`); neither when it was empty. */
export type ReplyRead = { value: unknown } | { note: string } | Record<string, never>;

/** `application/json`, parameters (charset) allowed: the answers whose body is read as a reply. */
export function isJsonContentType(contentType: string | string[] | undefined): boolean {
  const value = Array.isArray(contentType) ? contentType[0] : contentType;
  return value !== undefined && /^\s*application\/json\s*(;|$)/i.test(value);
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * Reads a delivered callback's answer body as its reply: at most MAX_REPLY_BYTES (a larger
 * declared or actual body stops the read and the connection), valid UTF-8 JSON that Postgres can
 * store (no NUL, no unpaired surrogate). Never throws: a body cut short, too large or not JSON
 * is a note, and the delivery still counts. The request's own time limit (its abort signal)
 * bounds the read, so a receiver trickling its body holds a delivery no longer than one that
 * never answers.
 */
export async function readReply(body: Readable, contentLength: string | string[] | undefined): Promise<ReplyRead> {
  const declared = Number(Array.isArray(contentLength) ? contentLength[0] : contentLength);
  if (declared > MAX_REPLY_BYTES) {
    body.destroy();
    return { note: tooLarge };
  }
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of body as AsyncIterable<Buffer>) {
      size += chunk.byteLength;
      if (size > MAX_REPLY_BYTES) {
        body.destroy();
        return { note: tooLarge };
      }
      chunks.push(chunk);
    }
  } catch (err) {
    return { note: `reply not stored: the body was cut short (${(err as { code?: string; message?: string })?.code ?? (err as Error)?.message ?? "error"})` };
  }
  if (size === 0) return {};
  return parseReply(Buffer.concat(chunks));
}

const tooLarge = `reply not stored: the body is larger than ${MAX_REPLY_BYTES} bytes`;

function parseReply(bytes: Uint8Array): ReplyRead {
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    return { note: "reply not stored: the body is not valid UTF-8" };
  }
  if (jsonDepthExceeds(text, MAX_REPLY_DEPTH)) return { note: `reply not stored: the body nests deeper than ${MAX_REPLY_DEPTH} levels` };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { note: `reply not stored: the body is not JSON (${(err as Error).message})` };
  }
  const unstorable = findUnstorable(value);
  if (unstorable !== null) return { note: `reply not stored: the string at '${unstorable}' holds \\u0000 or an unpaired surrogate` };
  return { value };
}
