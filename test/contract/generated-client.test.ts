import { execFile } from "node:child_process";
import fs from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { API_KEY, startTestApp, type TestApp } from "../helpers/test-app.ts";

/**
 * The committed document is the contract clients are generated from (API.md). This proves it end
 * to end: generate a TypeScript client with openapi-typescript, type-check a program written
 * against it (including calls that must NOT type-check), then run that program with Node against
 * a live server.
 */
const root = path.resolve(import.meta.dirname, "../..");
const run = promisify(execFile);

// The program a client author would write. `@ts-expect-error` lines must fail to type-check:
// if the generated types let anything through, tsc reports the directive as unused.
const PROGRAM = `
import createClient, { type Client } from "openapi-fetch";
import type { components, paths } from "./schema.d.ts";

type Wait = components["schemas"]["Wait"];

export async function walkThrough(baseUrl: string, token: string) {
  const client = createClient<paths>({ baseUrl, headers: { authorization: \`Bearer \${token}\` } });
  const run = "order-17";
  const signal = "manager-approval";

  const declared = await client.PUT("/signal-types/{name}", {
    params: { path: { name: signal } },
    body: {
      description: "Manager approves the order",
      schema: { type: "object", required: ["approved"], properties: { approved: { type: "boolean" } } },
      auth: { scheme: "none" },
    },
  });
  if (!declared.data) throw new Error(\`declare: HTTP \${declared.response.status}\`);

  const opened = await client.POST("/runs/{run}/waits", {
    params: { path: { run } },
    body: { signal, key: "scene-2/approval", timeout_s: 3600, metadata: { order_id: "o-17", assignee: "kim" } },
  });
  if (!opened.data) throw new Error(\`open: HTTP \${opened.response.status}\`);
  const wait: Wait = opened.data;

  const second = await client.POST("/runs/{run}/waits", { params: { path: { run } }, body: { signal } });
  const pendingBefore = await client.GET("/waits", { params: { query: { signal, status: "waiting" } } });

  const invalid = await client.POST("/signals/{run}/{signal}", { params: { path: { run, signal } }, body: { approved: "yes" } });
  const sent = await client.POST("/signals/{run}/{signal}", {
    params: { path: { run, signal }, header: { "idempotency-key": "approval-1" } },
    body: { approved: true },
  });

  const read = await client.GET("/waits/{id}", { params: { path: { id: wait.id }, query: { wait_s: 5 } } });
  const pendingAfter = await client.GET("/waits", { params: { query: { signal, status: "waiting" } } });
  const log = await client.GET("/runs/{run}/signals", { params: { path: { run } } });

  return {
    declared: { status: declared.response.status, name: declared.data.name, scheme: declared.data.auth.scheme },
    opened: { status: opened.response.status, id: wait.id, state: wait.status, metadata: wait.metadata },
    conflict: { status: second.response.status, problem: second.error?.title },
    pendingBefore: pendingBefore.data?.items.map((w) => w.id),
    invalid: { status: invalid.response.status, outcome: invalid.error?.outcome, paths: invalid.error?.validation_errors?.map((e) => e.path) },
    sent: { status: sent.response.status, outcome: sent.data?.outcome, sequence: sent.data?.sequence, waitId: sent.data?.wait_id },
    read: { state: read.data?.status, payload: read.data?.result?.payload, sequence: read.data?.result?.sequence },
    pendingAfter: pendingAfter.data?.items.map((w) => w.id),
    log: log.data?.items.map((s) => s.outcome),
  };
}

// Never called: it exists to be type-checked.
export function mustNotTypeCheck(client: Client<paths>, wait: Wait) {
  // @ts-expect-error the path parameter is called name
  void client.PUT("/signal-types/{name}", { params: { path: { nom: "x" } }, body: { auth: { scheme: "none" } } });
  // @ts-expect-error no such auth scheme
  void client.PUT("/signal-types/{name}", { params: { path: { name: "x" } }, body: { auth: { scheme: "basic" } } });
  // @ts-expect-error timeout_s is a number of seconds
  void client.POST("/runs/{run}/waits", { params: { path: { run: "r" } }, body: { signal: "s", timeout_s: "1h" } });
  // @ts-expect-error signal is required
  void client.POST("/runs/{run}/waits", { params: { path: { run: "r" } }, body: { key: "k" } });
  // @ts-expect-error no such path
  void client.GET("/no-such-path");
  // @ts-expect-error not a wait status
  const status: Wait["status"] = "open";
  return [status, wait.delivery.status satisfies "none" | "pending" | "delivered" | "failed"];
}

if (process.argv[2]) console.log(JSON.stringify(await walkThrough(process.argv[2], process.argv[3] ?? "")));
`;

const TSCONFIG = {
  compilerOptions: {
    target: "es2024",
    module: "nodenext",
    moduleResolution: "nodenext",
    lib: ["esnext"],
    types: ["node"],
    strict: true,
    noEmit: true,
    allowImportingTsExtensions: true,
    erasableSyntaxOnly: true,
    verbatimModuleSyntax: true,
    // Checks the generated schema.d.ts too; the libraries' own declarations are not ours to check.
    skipLibCheck: false,
    skipDefaultLibCheck: true,
  },
  files: ["program.ts"],
};

let dir: string;
let app: TestApp;

beforeAll(async () => {
  await fs.mkdir(path.join(root, "test/contract/.tmp"), { recursive: true });
  // Inside the repository, so `openapi-fetch` resolves from its node_modules.
  dir = await fs.mkdtemp(path.join(root, "test/contract/.tmp/client-"));
  await run(process.execPath, ["node_modules/.bin/openapi-typescript", "openapi/openapi.json", "-o", path.join(dir, "schema.d.ts")], { cwd: root });
  await fs.writeFile(path.join(dir, "program.ts"), PROGRAM);
  await fs.writeFile(path.join(dir, "tsconfig.json"), JSON.stringify(TSCONFIG, null, 2));
  app = await startTestApp();
}, 120_000);

afterAll(async () => {
  await app?.close();
  if (dir) await fs.rm(dir, { recursive: true, force: true });
});

describe("a client generated from openapi/openapi.json (openapi-typescript + openapi-fetch)", () => {
  it("has types for every path and schema of the document", async () => {
    const schema = await fs.readFile(path.join(dir, "schema.d.ts"), "utf8");
    const doc = JSON.parse(await fs.readFile(path.join(root, "openapi/openapi.json"), "utf8")) as { paths: object; components: { schemas: object } };
    for (const p of Object.keys(doc.paths)) expect(schema).toContain(`"${p}": {`);
    for (const s of Object.keys(doc.components.schemas)) expect(schema).toMatch(new RegExp(`\\b${s}: \\{`));
  });

  it("type-checks a program written against it, and rejects calls that break the contract", async () => {
    const result = await run(process.execPath, [path.join(root, "node_modules/.bin/tsc"), "-p", path.join(dir, "tsconfig.json")], { cwd: dir }).then(
      () => ({ code: 0, out: "" }),
      (err: { code?: number; stdout?: string; stderr?: string }) => ({ code: err.code, out: `${err.stdout}${err.stderr}` }),
    );
    expect(result.out).toBe("");
    expect(result.code).toBe(0);
  }, 60_000);

  it("runs against a live server: declare a type, open a wait, send a signal, read it back, list pending", async () => {
    const { stdout } = await run(process.execPath, [path.join(dir, "program.ts"), app.baseUrl, API_KEY], { cwd: dir });
    const out = JSON.parse(stdout);
    expect(out.declared).toEqual({ status: 201, name: "manager-approval", scheme: "none" });
    expect(out.opened).toMatchObject({ status: 201, state: "waiting", metadata: { order_id: "o-17", assignee: "kim" } });
    expect(out.opened.id).toMatch(/^wt_/);
    expect(out.conflict).toEqual({ status: 409, problem: expect.any(String) });
    expect(out.pendingBefore).toEqual([out.opened.id]);
    expect(out.invalid).toEqual({ status: 422, outcome: "rejected_invalid_payload", paths: ["/approved"] });
    expect(out.sent).toMatchObject({ status: 202, outcome: "received", sequence: 1, waitId: out.opened.id });
    expect(out.read).toEqual({ state: "received", payload: { approved: true }, sequence: 1 });
    expect(out.pendingAfter).toEqual([]);
    expect(out.log).toEqual(["rejected_invalid_payload", "received"]);
  }, 60_000);
});
