import { createHash } from "node:crypto";
import { decodeJwt } from "jose";
import { afterAll, beforeAll, expect, it } from "vitest";
import { openWait } from "../helpers/http.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";
import { signInConsole } from "../console/console-client.ts";
import { post, signStandard, snapshot, swSecret } from "../security/support.ts";

// An approval link answers with the idempotency key `link:<jti>`, the console with
// `console:<wait>:<sha256(operator)>`. When another accepted signal already holds that key,
// intake refuses the answer as rejected_idempotency_conflict: the link (or the operator) must be
// told so with a 409, and the link must not be used up by the refusal.
//
// Intake refuses such keys from outside senders, so the conflict is made here as it could only
// be made otherwise (a signal recorded before that rule): an outside vote, its key set in SQL.

const SW = swSecret(11);

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ worker: false });
  await app.api(`/signal-types/vote`, { method: "PUT", json: { auth: { scheme: "none" }, responses: ["approve", "reject"] } });
  await app.api(`/signal-types/vote-sw`, { method: "PUT", json: { auth: { scheme: "standard-webhooks", secrets: [SW] }, responses: ["approve", "reject"] } });
});
afterAll(async () => {
  await app?.close();
});

/** Mallory's vote on the run's open quorum wait, then given `key` as its idempotency key. */
async function outsideVoteHolding(runId: string, key: string): Promise<void> {
  const sent = await fetch(`${app.baseUrl}/signals/${runId}/vote`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ response: "reject", responder: "mallory" }),
  });
  expect(sent.status).toBe(202);
  const { signal_id } = (await sent.json()) as { signal_id: string };
  await app.database.sql`update signalbox.signals set idempotency_key = ${key} where id = ${signal_id}`;
}

it("a link whose idempotency key is taken answers a 409 page and is not used up", async () => {
  const wait = (await openWait(app, "r-q", { signal: "vote", quorum: { count: 2 } }, 201)).body as { id: string };
  const made = (await (await app.api(`/waits/${wait.id}/links`, { method: "POST", json: { responder: "kim" } })).json()) as { links: Record<string, string> };
  const jti = decodeJwt(made.links.approve!.split("/approvals/")[1]!).jti!;
  await outsideVoteHolding("r-q", `link:${jti}`);

  const res = await fetch(made.links.approve!, { method: "POST", headers: { accept: "text/html", "content-type": "application/x-www-form-urlencoded" }, body: "" });
  const html = await res.text();
  expect(res.status, html).toBe(409);
  expect(html).toContain("This link cannot be answered");

  // Nothing was recorded for the link: not its use, not a vote.
  expect(await app.database.sql`select 1 from signalbox.link_uses where link_id = ${jti}`).toHaveLength(0);
  const after = (await (await app.api(`/waits/${wait.id}`)).json()) as { status: string; votes: Record<string, string[]> };
  expect(after.status).toBe("waiting");
  expect(after.votes.approve ?? []).not.toContain("kim");
  // Its page still opens (not "already used"); answering again says the same.
  expect((await fetch(made.links.approve!, { headers: { accept: "text/html" } })).status).toBe(200);
});

it("the console says an operator's answer was refused because another signal holds its key, not 'you answered differently'", async () => {
  const wait = (await openWait(app, "r-q2", { signal: "vote", quorum: { count: 2 } }, 201)).body as { id: string };
  const who = createHash("sha256").update("Kim Operator").digest("base64url").slice(0, 22);
  await outsideVoteHolding("r-q2", `console:${wait.id}:${who}`);

  const cc = await signInConsole(app, { name: "Kim Operator" });
  const res = await cc.post(`/console/approvals/${wait.id}`, { response: "approve" });
  const html = await res.text();
  expect(res.status, html).toBe(409);
  expect(html).toContain("another signal already holds");
  expect(res.headers.get("location")).toBeNull();
});

it("an operator answering again differently is still told their first answer stands", async () => {
  const wait = (await openWait(app, "r-q3", { signal: "vote", quorum: { count: 2 } }, 201)).body as { id: string };
  const cc = await signInConsole(app, { name: "Kim Operator" });
  expect((await cc.post(`/console/approvals/${wait.id}`, { response: "approve" })).headers.get("location")).toBe("/console/approvals?answered=vote");
  const again = await cc.post(`/console/approvals/${wait.id}`, { response: "reject" });
  expect(again.status).toBe(303);
  expect(again.headers.get("location")).toBe("/console/approvals?answered=rejected_idempotency_conflict");
});

it("a signed webhook-id (the key of a Standard Webhooks sender) that is a link's or the console's key is refused with 400, changing nothing: the link still answers", async () => {
  const wait = (await openWait(app, "r-q4", { signal: "vote-sw", quorum: { count: 2 } }, 201)).body as { id: string };
  const made = (await (await app.api(`/waits/${wait.id}/links`, { method: "POST", json: { responder: "kim" } })).json()) as { links: Record<string, string> };
  const jti = decodeJwt(made.links.approve!.split("/approvals/")[1]!).jti!;
  const who = createHash("sha256").update("Kim Operator").digest("base64url").slice(0, 22);
  const body = JSON.stringify({ response: "reject", responder: "mallory" });
  for (const id of [`link:${jti}`, `console:${wait.id}:${who}`]) {
    const before = await snapshot(app);
    const sent = await post(app, "r-q4", "vote-sw", body, signStandard(SW, body, { id }));
    expect(sent.status, sent.text).toBe(400);
    expect(sent.text).toMatch(/webhook-id/);
    expect(await snapshot(app)).toEqual(before);
  }

  const res = await fetch(made.links.approve!, { method: "POST", headers: { accept: "text/html", "content-type": "application/x-www-form-urlencoded" }, body: "" });
  expect(res.status, await res.text()).toBe(200);
  const after = (await (await app.api(`/waits/${wait.id}`)).json()) as { votes: Record<string, string[]> };
  expect(after.votes.approve).toContain("kim");
});
