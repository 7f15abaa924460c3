import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { addressAllowed } from "../../src/waits/kinds/sensor-spec.ts";
import { advanceClock } from "../helpers/clock.ts";
import { expectProblem, openWait } from "../helpers/http.ts";
import { resolutionEvents } from "../helpers/race-gates.ts";
import { waitFor } from "../helpers/wait-for.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

// An IPv6 address in ::ffff:0:0/96 (IPv4-mapped) or ::/96 (IPv4-compatible) reaches the IPv4
// address in its last 32 bits. Node's URL parser writes them in hex (::ffff:a9fe:a9fe), so a
// check that knows only the dotted form let a sensor reach the metadata service.

// Names under .test resolve, for the sensor's per-poll check, to what `resolvesTo` says; any
// other name resolves as usual.
const resolvesTo: Record<string, string> = {
  "mapped-hex.sensor.test": "::ffff:a9fe:a9fe",
  "mapped-dotted.sensor.test": "::ffff:169.254.169.254",
  "compatible.sensor.test": "::a9fe:a9fe",
};
vi.mock(import("node:dns/promises"), async (importOriginal) => {
  const real = await importOriginal();
  const lookup = (async (host: string, opts: unknown) => {
    const address = resolvesTo[host];
    return address ? [{ address, family: 6 }] : real.lookup(host, opts as never);
  }) as typeof real.lookup;
  return { ...real, default: { ...real.default, lookup }, lookup };
});

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ env: { SIGNALBOX_SENSOR_TIMEOUT_MS: "300" } });
});
afterAll(async () => {
  await app.close();
});

const create = (run: string, signal: string, url: string) => app.api(`/runs/${run}/waits`, { method: "POST", json: { signal, sensor: { url } } });

describe("sensor targets written as IPv4 inside IPv6", () => {
  it("refuses the metadata address in every IPv6 spelling, as it refuses the plain one", async () => {
    await expectProblem(await create("mapped-1", "plain", "http://169.254.169.254/latest/meta-data/"), 400);
    for (const url of [
      "http://[::ffff:169.254.169.254]/latest/meta-data/", // mapped, dotted (URL rewrites it to hex)
      "http://[0:0:0:0:0:ffff:a9fe:a9fe]/", // mapped, written out in full
      "http://[::ffff:a9fe:a9fe]/",
      "http://[::a9fe:a9fe]/", // IPv4-compatible (deprecated)
      "http://[::169.254.169.254]/",
      "http://[::ffff:169.254.0.1]/", // anywhere in 169.254.0.0/16
    ]) {
      const problem = await expectProblem(await create("mapped-1", "meta", url), 400);
      expect(problem.validation_errors, url).toEqual([{ path: "/sensor/url", message: expect.stringContaining("link-local") }]);
    }
  });

  it("still accepts mapped addresses outside 169.254.0.0/16", async () => {
    const { status } = await openWait(app, "mapped-2", { signal: "ok", sensor: { url: "http://[::ffff:127.0.0.1]:9/", max_polls: 1 } });
    expect(status).toBe(201);
  });

  it("at each poll, a name that resolves to a mapped or compatible metadata address is a miss", async () => {
    const ids: string[] = [];
    for (const host of Object.keys(resolvesTo)) {
      ids.push((await openWait(app, "mapped-3", { signal: host, sensor: { url: `http://${host}/`, interval_s: 1, max_polls: 1 } }, 201)).body.id);
    }
    const events = await waitFor("every sensor to run out of polls", async () => {
      await advanceClock(app, 1);
      return resolutionEvents(app, "mapped-3");
    }, { until: (es) => es.length === ids.length, timeoutMs: 15_000 });
    expect(events.every((e) => e.type === "signal.timeout")).toBe(true);
    const timeouts = ((await (await app.api("/runs/mapped-3/events?limit=500")).json()) as any).items.filter((e: any) => e.type === "signal.timeout");
    expect(timeouts.map((e: any) => e.data.last)).toEqual(ids.map(() => "the host resolves to a link-local address"));
  });

  it("SIGNALBOX_SENSOR_ALLOW naming the IPv4 address allows its IPv6 spellings too", () => {
    expect(addressAllowed("::ffff:a9fe:a9fe", ["169.254.169.254"])).toBe(true);
    expect(addressAllowed("::a9fe:a9fe", ["169.254.0.0/16"])).toBe(true);
    expect(addressAllowed("::ffff:a9fe:a9fe", ["10.0.0.0/8"])).toBe(false);
    expect(addressAllowed("fe80::1", [])).toBe(false);
    expect(addressAllowed("FE80:0:0:0:0:0:0:1", [])).toBe(false);
    expect(addressAllowed("::1", [])).toBe(true);
    expect(addressAllowed("2001:db8::a9fe:a9fe", [])).toBe(true); // the last 32 bits alone are not IPv4
  });
});
