import { randomBytes } from "node:crypto";

export type IdPrefix = "wt" | "sg" | "ev" | "nt" | "lk";

/**
 * Opaque ids with a type prefix. The first 10 characters encode the creation time in
 * milliseconds (base32, fixed width) so ids created later usually sort later; 16 random
 * bytes follow. Nothing may rely on the ordering: lists sort by their timestamp columns.
 */
const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";

export function newId(prefix: IdPrefix, now = Date.now()): string {
  let time = "";
  let t = now;
  for (let i = 0; i < 10; i++) {
    time = ALPHABET[t % 32] + time;
    t = Math.floor(t / 32);
  }
  const rand = randomBytes(16);
  let tail = "";
  for (const byte of rand) tail += ALPHABET[byte % 32];
  return `${prefix}_${time}${tail}`;
}
