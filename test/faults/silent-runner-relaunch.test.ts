import { expect, it } from "vitest";
import { startCallbackReceiver } from "../helpers/callback-receiver.ts";
import { serviceBehindSilencingProxy } from "../helpers/silencing-proxy.ts";
import { answers200 } from "../helpers/service-process.ts";
import { waitFor } from "../helpers/wait-for.ts";

// The timers runner's connections go silent (a failover or a network cut: open, no answer, no
// reset), through a proxy in front of Postgres. The watchdog replaces the runner on a new pool,
// whose first connection goes silent too, right after its start-up, while graphile-worker's
// run() starts on it. Then new connections work again. The supervisor must not wait on that
// start for good: the runner comes back, a timeout fires, /readyz is ready, and no silent
// connection is left open.

const own = serviceBehindSilencingProxy("silent-relaunch", { SIGNALBOX_WORKER_STALE_S: "3" });

it("a runner relaunched onto a connection that goes silent while it starts comes back once new connections work", async () => {
  const { svc, proxy } = own;
  const engine = await startCallbackReceiver();
  try {
    proxy.silenceNew("signalbox-worker-timers");
    expect(proxy.silence("signalbox-worker-timers")).toBeGreaterThan(0);
    // The watchdog replaces the runner after 2 x 5 s without a look for jobs.
    await waitFor("the relaunch's connection silenced after its start-up", () => proxy.silencedAfterStartup(), { timeoutMs: 30_000, until: (n) => n > 0 });
    await new Promise((r) => setTimeout(r, 1_000));
    proxy.silenceNew(undefined);

    const res = await svc.api("/runs/after-heal/waits", { method: "POST", json: { signal: "approval", timeout_s: 1, callback_url: engine.url } });
    expect(res.status).toBe(201);
    const { id } = (await res.json()) as { id: string };
    await waitFor("the wait to time out", async () => ((await (await svc.api(`/waits/${id}`)).json()) as { status: string }).status, {
      timeoutMs: 45_000,
      intervalMs: 500,
      until: (s) => s === "timed_out",
      context: async () => JSON.stringify(await (await svc.api("/readyz?verbose")).json()),
    });
    await answers200(svc, "/readyz", 5_000);
    expect(svc.output()).toContain("starting the job runner took longer than");
    await waitFor("the silent connections to be closed", () => proxy.silentOpen("signalbox-worker-timers"), { timeoutMs: 15_000, until: (n) => n === 0 });
  } finally {
    await engine.close();
  }
}, 120_000);
