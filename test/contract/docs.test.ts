import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

const committed = path.resolve(import.meta.dirname, "../../openapi/openapi.json");

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ worker: false });
});
afterAll(async () => {
  await app.close();
});

describe("the published contract", () => {
  it("serves the API reference at /docs as HTML that loads /openapi.json, without a token", async () => {
    const res = await fetch(`${app.baseUrl}/docs`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/html/);
    const html = await res.text();
    expect(html).toContain("/openapi.json");
    expect(html).toMatch(/<title>signalbox API<\/title>/);
  });

  it("serves /openapi.json without a token, equal to the committed openapi/openapi.json", async () => {
    const res = await fetch(`${app.baseUrl}/openapi.json`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(await res.json()).toEqual(JSON.parse(fs.readFileSync(committed, "utf8")));
  });

  it("still wants a token on a management route (the two above are public on purpose)", async () => {
    const res = await fetch(`${app.baseUrl}/signal-types`);
    expect(res.status).toBe(401);
    expect(res.headers.get("content-type")).toMatch(/^application\/problem\+json/);
  });
});
