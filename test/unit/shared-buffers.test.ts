import { describe, expect, it } from "vitest";
import { sharedBuffersMiB } from "../../src/db/embedded.ts";

const GiB = 2 ** 30;

describe("the embedded cluster's shared_buffers", () => {
  it("is a quarter of the usable memory, between Postgres's default and 1 GiB", () => {
    expect(sharedBuffersMiB(0.25 * GiB)).toBe(128); // a small container: never below the default
    expect(sharedBuffersMiB(2 * GiB)).toBe(512);
    expect(sharedBuffersMiB(64 * GiB)).toBe(1024);
  });

  it("is set from this machine's memory", () => {
    const mib = sharedBuffersMiB();
    expect(mib).toBeGreaterThanOrEqual(128);
    expect(mib).toBeLessThanOrEqual(1024);
  });
});
