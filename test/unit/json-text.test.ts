import { describe, expect, it } from "vitest";
import { inexactNumbers } from "../../src/core/json-text.ts";

describe("inexactNumbers: numbers whose digits a double does not keep", () => {
  it.each([
    ["100.0000000000000000001", true],
    ["9007199254740993", true],
    ["123456789012345678", true],
    ["1e400", true],
    ["-1e400", true],
    ["100", false],
    ["100.000", false],
    ["1e2", false],
    ["0.1", false],
    ["-0", false],
    ["0.000", false],
    ["1.5e-7", false],
    ["0.00012", false],
    ["9007199254740992", false],
  ])("%s → %s", (literal, inexact) => {
    expect(inexactNumbers(`{"v":${literal}}`)).toEqual(inexact ? ["/v"] : []);
  });

  it("points into arrays and escaped keys", () => {
    expect(inexactNumbers('{"a/b":[1, 2.00000000000000000001], "~":{"x":1e999}}')).toEqual(["/a~1b/1", "/~0/x"]);
  });
});
