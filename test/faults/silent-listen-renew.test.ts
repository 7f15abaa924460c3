import { expect, it } from "vitest";
import { serviceBehindSilencingProxy } from "../helpers/silencing-proxy.ts";
import { answers200 } from "../helpers/service-process.ts";
import { waitFor } from "../helpers/wait-for.ts";

// The LISTEN connection goes silent (a failover or a network cut: open, no answer, no reset),
// through a proxy in front of Postgres. superviseListening renews it on a new client, whose
// connection goes silent too, right after its start-up, while its LISTEN is in flight. Then new
// connections work again. The supervisor must not wait on that LISTEN for good: /readyz is
// ready again, a long-poll is woken by a signal's NOTIFY, and no silent connection is left open.

const own = serviceBehindSilencingProxy("silent-renew");

it("a LISTEN renewed onto a connection that goes silent comes back once new connections work", async () => {
  const { svc, proxy } = own;
  proxy.silenceNew("signalbox-listen");
  expect(proxy.silence("signalbox-listen")).toBeGreaterThan(0);
  await waitFor("the renewal", () => svc.output().includes("the LISTEN connection stopped delivering"), { timeoutMs: 30_000 });
  await waitFor("the renewed connection silenced after its start-up", () => proxy.silencedAfterStartup(), { timeoutMs: 10_000, until: (n) => n > 0 });
  await new Promise((r) => setTimeout(r, 1_000));
  proxy.silenceNew(undefined);

  await answers200(svc, "/readyz", 40_000);
  // A long-poll is woken by the signal's NOTIFY, not by the 10 s safety poll.
  const wait = (await (await svc.api("/runs/renew/waits", { method: "POST", json: { signal: "approval" } })).json()) as { id: string };
  const held = svc.api(`/waits/${wait.id}?wait_s=25`);
  await new Promise((r) => setTimeout(r, 300));
  const sent = performance.now();
  expect((await fetch(`${svc.baseUrl}/signals/renew/approval`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })).status).toBe(202);
  expect(((await (await held).json()) as { status: string }).status).toBe("received");
  expect(performance.now() - sent).toBeLessThan(5_000);
  await waitFor("the silent connections to be closed", () => proxy.silentOpen("signalbox-listen"), { timeoutMs: 20_000, until: (n) => n === 0 });
}, 120_000);
