import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_FORM_BYTES } from "../../src/approvals/respond-to-link.ts";
import { declareType, openWait } from "../helpers/http.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

/**
 * Approval links are public: anyone may POST any body to any /approvals/ path. A forged link
 * costs a signature check, never the reading of its body, and a real link reads a few KiB.
 */
describe("answer forms sent to approval links", () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
    await declareType(app, "approval", { auth: { scheme: "none" }, responses: ["approve", "reject"] });
  });
  afterAll(() => app.close());

  /** POSTs a form that never ends (a first chunk, then nothing) and resolves with the status it is answered. */
  function endlessForm(url: string, contentType = "application/x-www-form-urlencoded"): Promise<{ status: number; bodyEnded: boolean }> {
    return new Promise((resolve, reject) => {
      const req = request(url, { method: "POST", headers: { "content-type": contentType, "transfer-encoding": "chunked", accept: "application/json" } }, (res) => {
        res.resume();
        resolve({ status: res.statusCode!, bodyEnded: req.writableEnded });
        req.destroy();
      });
      req.on("error", reject);
      req.write("comment=" + "a=b&".repeat(25_000)); // 100,000 bytes of fields, and no end
    });
  }

  it("a forged token is refused (400) before its body is read", async () => {
    const answered = await endlessForm(`${app.baseUrl}/approvals/not.a-real.token`);
    expect(answered).toEqual({ status: 400, bodyEnded: false });
  });

  // The input guard read every JSON body whole, uncapped (approval links skip the body limit),
  // before the link's token was checked: an anonymous upload of any size was held in memory.
  it("a forged token is refused (400) before its body is read, whatever its content type says", async () => {
    for (const type of ["application/json", "text/plain", "application/merge-patch+json"]) {
      expect(await endlessForm(`${app.baseUrl}/approvals/not.a-real.token`, type), type).toEqual({ status: 400, bodyEnded: false });
    }
  });

  it("a real link refuses a form past the cap (413) unread, and still works afterwards", async () => {
    const wait = await openWait(app, "run-forms", { signal: "approval" });
    const made = await app.api(`/waits/${wait.body.id}/links`, { method: "POST", json: { responder: "kim" } });
    const { links } = (await made.json()) as { links: Record<string, string> };
    expect(await endlessForm(links.approve!)).toEqual({ status: 413, bodyEnded: false });
    expect(MAX_FORM_BYTES).toBeLessThan(32 * 1024);

    const ok = await fetch(links.approve!, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "comment=fine" });
    expect(ok.status).toBe(200);
    expect((await (await app.api(`/waits/${wait.body.id}`)).json()) as object).toMatchObject({ status: "received" });
  });
});
