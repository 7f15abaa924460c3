import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

// The reference at /docs offers each operation's documented request as its example: sent as it
// stands, in the order a user would try them, each must be accepted (no 4xx).

type Operation = {
  operationId: string;
  parameters?: Array<{ name: string; in: string; schema?: { example?: unknown }; example?: unknown }>;
  requestBody?: { content: Record<string, { example?: unknown }> };
};

let app: TestApp;
let operations: Map<string, { method: string; path: string; op: Operation }>;

beforeAll(async () => {
  app = await startTestApp({ worker: false });
  const doc = (await (await fetch(`${app.baseUrl}/openapi.json`)).json()) as { paths: Record<string, Record<string, Operation>> };
  operations = new Map(Object.entries(doc.paths).flatMap(([path, ops]) => Object.entries(ops).map(([method, op]) => [op.operationId, { method, path, op }] as const)));
});
afterAll(async () => {
  await app?.close();
});

/** A user's order: declare the type, open a wait, ask for links, send the signal, then the rest. */
const TRIED_IN_ORDER = ["putSignalType", "openWait", "createApprovalLinks", "sendSignal", "sendSignalBatch", "redriveSignals", "addRunChild", "pauseRun", "resumeRun", "cancelRun"];
/**
 * Tried on a database of its own: a run's last word (its example names the run the others
 * control, and a continued run is neither paused, resumed nor cancelled, nor a cancelled one continued).
 */
const TRIED_ALONE = ["continueRun"];

/** Sends an operation's documented example as it stands; `waitId` fills an `{id}` path parameter. */
async function sendExample(to: TestApp, id: string, waitId = ""): Promise<{ status: number; text: string }> {
  const { method, path, op } = operations.get(id)!;
  const url = path.replace(/\{([^}]+)\}/g, (_, name: string) => {
    if (name === "id") return waitId; // the wait the documented openWait just opened
    const p = op.parameters?.find((x) => x.name === name && x.in === "path");
    return encodeURIComponent(String(p?.example ?? p?.schema?.example));
  });
  const res = await to.api(url, { method: method.toUpperCase(), json: op.requestBody!.content["application/json"]!.example });
  return { status: res.status, text: await res.text() };
}

const answered = ({ status, text }: { status: number; text: string }) => `${status} ${status >= 400 ? text : ""}`.trim();

describe("documented request examples", () => {
  it("every JSON request body has an example of its own", () => {
    const missing = [...operations.values()].filter(({ op }) => op.requestBody?.content["application/json"] && op.requestBody.content["application/json"].example === undefined).map(({ op }) => op.operationId);
    expect(missing).toEqual([]);
    const tried = new Set([...TRIED_IN_ORDER, ...TRIED_ALONE]);
    expect([...operations.values()].filter(({ op }) => op.requestBody?.content["application/json"] && !tried.has(op.operationId)).map(({ op }) => op.operationId)).toEqual([]);
  });

  it("each one, sent as documented, is accepted", async () => {
    let waitId = "";
    const answers: Record<string, string> = {};
    for (const id of TRIED_IN_ORDER) {
      const sent = await sendExample(app, id, waitId);
      answers[id] = answered(sent);
      if (id === "openWait") waitId = (JSON.parse(sent.text) as { id: string }).id;
    }
    const alone = await startTestApp({ worker: false });
    try {
      for (const id of TRIED_ALONE) answers[id] = answered(await sendExample(alone, id));
    } finally {
      await alone.close();
    }
    expect(Object.fromEntries(Object.entries(answers).filter(([, a]) => !/^2\d\d$/.test(a)))).toEqual({});
  });
});
