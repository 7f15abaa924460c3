import { expect, it } from "vitest";
import { serviceOnOwnPostgres } from "../helpers/own-postgres-service.ts";
import { answers200 } from "../helpers/service-process.ts";

// The LISTEN connection left open and silent (a failover or a network cut: no error, no reset)
// while new connections work. Here its backend is stopped (SIGSTOP) and the postmaster is not:
// the process must notice that its NOTIFYs no longer come back and listen on a new connection,
// so /readyz is ready again and long-polls are woken by changes.

const own = serviceOnOwnPostgres("silent-listen");

it("a LISTEN connection gone silent is replaced: ready again, and a long-poll wakes at the change", async () => {
  const { pg, svc } = own;
  expect(await pg.freezeBackends("signalbox-listen")).toBeGreaterThan(0);

  await answers200(svc, "/readyz", 20_000);
  expect(svc.logs().some((l) => String(l.msg).includes("the LISTEN connection stopped delivering"))).toBe(true);

  // A long-poll is woken by the signal's NOTIFY, not by the 10 s safety poll.
  const wait = (await (await svc.api("/runs/silent-listen/waits", { method: "POST", json: { signal: "approval" } })).json()) as { id: string };
  const held = svc.api(`/waits/${wait.id}?wait_s=25`);
  await new Promise((r) => setTimeout(r, 300));
  const sent = performance.now();
  expect((await fetch(`${svc.baseUrl}/signals/silent-listen/approval`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })).status).toBe(202);
  const answered = (await (await held).json()) as { status: string };
  expect(answered.status).toBe("received");
  expect(performance.now() - sent).toBeLessThan(5_000);
}, 90_000);
