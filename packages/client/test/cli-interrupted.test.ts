// Ctrl-C ends `signalbox tail` cleanly (exit 0), but a command cut short by it did not do its
// job: `signalbox send` interrupted while it retries must not exit 0 with nothing said, or a
// script takes a signal that was never accepted for sent.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { waitFor } from "../../../test/helpers/wait-for.ts";
import { collect, spawnCli } from "./helpers/run-cli.ts";

describe("signalbox send interrupted between two attempts", () => {
  it("says so and exits 130", async () => {
    let requests = 0;
    // Answers the first attempt 503 (retry in 1 s), then goes away: the retries find nothing.
    const server = createServer((req, res) => {
      requests++;
      req.resume();
      res.writeHead(503, { "content-type": "application/problem+json", "retry-after": "1", connection: "close" });
      res.end(JSON.stringify({ type: "about:blank", title: "Service Unavailable", status: 503, detail: "database unavailable" }));
      server.close();
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const child = spawnCli(["send", "order-1", "approval", "--data", "{}", "--url", url, "--token", "k"]);
    const out = collect(child);
    const code = new Promise<number | null>((resolve) => child.once("close", (c) => resolve(c)));
    await waitFor("the first attempt", () => requests, { until: (n) => n === 1 });
    child.kill("SIGINT"); // Ctrl-C while it waits to retry
    expect({ code: await code, stderr: out.stderr() }).toEqual({ code: 130, stderr: expect.stringMatching(/^error: interrupted/) });
  });
});
