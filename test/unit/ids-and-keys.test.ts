import { describe, expect, it } from "vitest";
import { matchesApiKey } from "../../src/auth/api-keys.ts";
import { newId } from "../../src/core/ids.ts";

describe("newId", () => {
  it("draws 16 fresh random characters for every id, across refills of its random pool", () => {
    const ids = Array.from({ length: 10_000 }, () => newId("sg", 0)); // one millisecond: only the random part differs
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids.slice(0, 300)) expect(id).toMatch(/^sg_0{10}[0-9a-hjkmnp-tv-z]{16}$/);
    // 16 bytes an id from a 4 KiB pool: 256 ids a pool, so 10,000 ids drew about 40 pools. No
    // tail repeats, and every character of the alphabet turns up in every position.
    for (let pos = 13; pos < 29; pos++) expect(new Set(ids.map((id) => id[pos])).size).toBe(32);
  });

  it("starts with the creation time, so later ids sort later", () => {
    expect(newId("wt", 1_000).slice(0, 13) < newId("wt", 2_000).slice(0, 13)).toBe(true);
  });
});

describe("matchesApiKey", () => {
  const keys = ["first-key", "second-key"];
  it("accepts any configured key and nothing else, asked again and again", () => {
    for (let round = 0; round < 3; round++) {
      expect(matchesApiKey("first-key", keys)).toBe(true);
      expect(matchesApiKey("second-key", keys)).toBe(true);
      expect(matchesApiKey("third-key", keys)).toBe(false);
      expect(matchesApiKey("first-key", ["other"])).toBe(false);
    }
  });
});
