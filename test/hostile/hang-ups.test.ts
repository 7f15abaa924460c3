import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../helpers/wait-for.ts";
import { declareType} from "../helpers/http.ts";
import { logCapture } from "../helpers/probes.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

/** Starts a POST with a body it never finishes, then hangs up. */
function hangUpMidUpload(port: number, path: string, headers = ""): Promise<void> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port }, () => {
      socket.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n${headers}\r\n{"a":`);
      setTimeout(() => socket.destroy(), 50);
    });
    socket.on("close", () => resolve());
    socket.on("error", () => {});
  });
}

describe("clients that hang up mid-upload", () => {
  const { stream, lines } = logCapture<{ level: number; msg: string; requestId?: string; status?: number }>();
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ env: { LOG_LEVEL: "debug" }, logStream: stream });
    await declareType(app, "upload");
  });
  afterAll(() => app.close());

  it("are not errors: no error line, no stack, at most a line each below warn", async () => {
    const port = Number(new URL(app.baseUrl).port);
    const before = lines.length;
    for (let i = 0; i < 20; i++) {
      await hangUpMidUpload(port, "/signals/run-1/upload");
      await hangUpMidUpload(port, "/signal-types/other", "Authorization: Bearer test-management-key\r\n");
    }
    await waitFor("40 request lines", () => lines.length - before, { until: (n) => n >= 40, timeoutMs: 5_000 }).catch(() => {});
    const written = lines.slice(before).filter((l) => l.requestId !== undefined); // not the job runner's own lines
    expect(written.filter((l) => l.level >= 40)).toEqual([]); // nothing at warn or above
    expect(written.length).toBeLessThanOrEqual(40);
    expect(written.filter((l) => l.msg === "request").map((l) => l.status)).toEqual(Array(40).fill(499));
    expect(JSON.stringify(written)).not.toMatch(/"stack"|    at /);
    expect((await fetch(`${app.baseUrl}/healthz`)).status).toBe(200);
  });
});
