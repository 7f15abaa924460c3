import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";

describe("settings out of range are refused at start, naming the setting", () => {
  it.each(["36501", "3000000", "9999999999"])("SIGNALBOX_RETENTION_DAYS=%s (a purge cutoff Postgres cannot hold)", (days) => {
    expect(() => loadConfig({ SIGNALBOX_RETENTION_DAYS: days })).toThrow(/SIGNALBOX_RETENTION_DAYS/);
  });

  it("SIGNALBOX_RETENTION_DAYS=36500 and 0 (keep everything) are accepted", () => {
    expect(loadConfig({ SIGNALBOX_RETENTION_DAYS: "36500" }).SIGNALBOX_RETENTION_DAYS).toBe(36_500);
    expect(loadConfig({ SIGNALBOX_RETENTION_DAYS: "0" }).SIGNALBOX_RETENTION_DAYS).toBe(0);
  });
});
