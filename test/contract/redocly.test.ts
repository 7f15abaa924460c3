import { execFile } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const root = path.resolve(import.meta.dirname, "../..");
const run = promisify(execFile);

interface LintReport {
  totals: { errors: number; warnings: number; ignored: number };
  problems: Array<{ ruleId: string; severity: string; message: string; location: Array<{ pointer: string }> }>;
}

/** `redocly lint` with redocly.yaml (recommended + RFC 9457 problems) on the committed document. */
async function lint(): Promise<LintReport> {
  // Redocly exits 1 when it finds errors; the JSON report is on stdout either way.
  const out = await run(process.execPath, ["node_modules/.bin/redocly", "lint", "openapi/openapi.json", "--format=json"], {
    cwd: root,
    maxBuffer: 16 * 1024 * 1024,
    env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true" },
  }).catch((err: { stdout?: string }) => ({ stdout: err.stdout ?? "" }));
  return JSON.parse(out.stdout) as LintReport;
}

describe("openapi/openapi.json under redocly lint", () => {
  it("has no errors and no warnings", async () => {
    const report = await lint();
    const findings = report.problems.map((p) => `${p.severity} ${p.ruleId}: ${p.message} at ${p.location.map((l) => l.pointer).join(", ")}`);
    expect(findings).toEqual([]);
    expect(report.totals).toMatchObject({ errors: 0, warnings: 0 });
  }, 60_000);

  it("ignores nothing but a 4xx on the public operations (see redocly.yaml)", () => {
    const ignoreFile = fs.readFileSync(path.join(root, ".redocly.lint-ignore.yaml"), "utf8");
    const doc = JSON.parse(fs.readFileSync(path.join(root, "openapi/openapi.json"), "utf8")) as {
      paths: Record<string, Record<string, { security?: unknown[] }>>;
    };
    const rules = [...ignoreFile.matchAll(/^ {2}([\w-]+):\s*$/gm)].map((m) => m[1]);
    expect(rules).toEqual(["operation-4xx-response"]);
    const pointers = [...ignoreFile.matchAll(/^ {4}- '(#[^']+)'\s*$/gm)].map((m) => m[1]!);
    expect(pointers.length).toBeGreaterThan(0);
    for (const pointer of pointers) {
      const [, rawPath, method] = /^#\/paths\/([^/]+)\/(\w+)\/responses$/.exec(pointer) ?? [];
      const operation = doc.paths[rawPath!.replaceAll("~1", "/").replaceAll("~0", "~")]?.[method!];
      expect(operation, pointer).toBeDefined();
      expect(operation!.security, `${pointer} must be a public operation`).toEqual([]);
    }
  });
});
