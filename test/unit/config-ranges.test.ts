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

describe("SIGNALBOX_CALLBACK_SECRET is refused at start unless engines can verify with it", () => {
  // Standard Webhooks libraries and the engine SDK read the secret as whsec_ + base64: signalbox
  // once signed with a bare string's UTF-8 bytes, and every callback then failed with 401.
  it.each(["my-callback-secret", "c2lnbmFsYm94LWNhbGxiYWNrLXNlY3JldA==", "whsec_c2lnbmFsYm94LWNhbGxiYWNr-XNl", "whsec_c2lnbmFsYm9", "whsec_"])("%s", (secret) => {
    expect(() => loadConfig({ SIGNALBOX_CALLBACK_SECRET: secret })).toThrow(/SIGNALBOX_CALLBACK_SECRET/);
  });

  it("whsec_ and padded base64 is accepted", () => {
    expect(loadConfig({ SIGNALBOX_CALLBACK_SECRET: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" }).SIGNALBOX_CALLBACK_SECRET).toBeDefined();
    expect(loadConfig({ SIGNALBOX_CALLBACK_SECRET: "whsec_c2lnbmFsYm94LWNhbGxiYWNrLXNlY3JldA==" }).SIGNALBOX_CALLBACK_SECRET).toBeDefined();
  });
});
