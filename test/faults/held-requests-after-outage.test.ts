import { expect, it } from "vitest";
import { serviceOnOwnPostgres } from "../helpers/own-postgres-service.ts";
import { answers200 } from "../helpers/service-process.ts";

// Long-polls held when the database goes away are answered 503 (app.ts, failFastWhileDatabaseDown),
// but the handler behind each goes on holding its place among SIGNALBOX_MAX_HELD_REQUESTS until
// its wait_s passes (up to 60 s): after a short outage, the clients' retries find the places
// taken and got 503 "requests are held open already". Now the 503 ends the hold (src/http/held-request.ts).

const own = serviceOnOwnPostgres("held-503", { SIGNALBOX_MAX_HELD_REQUESTS: "2" });

it("held long-polls answered 503 give their places back", async () => {
  const { pg, svc } = own;
  // The cap is 2: both places are taken by these long-polls.
  const ids: string[] = [];
  for (const run of ["a", "b"]) ids.push(((await (await svc.api(`/runs/${run}/waits`, { method: "POST", json: { signal: "approval" } })).json()) as { id: string }).id);
  const held = ids.map((id) => svc.api(`/waits/${id}?wait_s=60`, { timeoutMs: 70_000 }).then((r) => r.status));
  await new Promise((r) => setTimeout(r, 500));
  await pg.stop("fast");
  expect(await Promise.all(held)).toEqual([503, 503]);
  await pg.start();
  await answers200(svc, "/readyz", 20_000);
  // Back: a client's retry is held again, not refused for places the answered ones still hold.
  const res = await svc.api(`/waits/${ids[0]}?wait_s=1`);
  expect(res.status, await res.text()).toBe(200);
}, 120_000);
