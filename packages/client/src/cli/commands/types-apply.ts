import fs from "node:fs";
import { problemFrom } from "../../http.ts";
import { SignalboxConnectionError, SignalboxProblem } from "../../problem.ts";
import type { SignalTypeInput } from "../../types.ts";
import type { Command } from "../command.ts";
import { EXIT, UsageError } from "../exit-codes.ts";
import { table } from "../output.ts";

export const typesApply: Command = {
  name: ["types", "apply"],
  summary: "declare the signal types of a JSON file (create or replace each)",
  args: "<file>",
  arity: [1, 1],
  options: {},
  help: `The file has the format of SIGNALBOX_SIGNAL_TYPES_FILE: {"<name>": <signal type>, ...},
each entry the body of PUT /signal-types/{name}. A secret written "env:NAME" is read from that
environment variable here, so the file holds no secret. Every entry is applied, even after one
fails; the exit code is 1 if any failed.

Options:
  --json   one result per entry: {"name", "result": "created" | "replaced" | "failed", ...}

Example file:
  {
    "manager-approval": {"schema": {"type": "object", "required": ["approved"]}, "auth": {"scheme": "none"}},
    "payment": {"auth": {"scheme": "standard-webhooks", "secrets": ["env:PAYMENT_WEBHOOK_SECRET"]}, "buffer_ttl_s": 3600}
  }`,
  async run({ positionals, json, client, output, env }) {
    const entries = readTypesFile(positionals[0]!, env);
    const results: Array<{ name: string; result: "created" | "replaced" | "failed"; status?: number; detail?: string }> = [];
    const api = client().api;
    for (const [name, body] of entries) {
      let answer;
      try {
        answer = await api.PUT("/signal-types/{name}", { params: { path: { name } }, body });
      } catch (err) {
        throw new SignalboxConnectionError(client().baseUrl, err); // nothing else will get through either
      }
      if (answer.response.ok) {
        results.push({ name, result: answer.response.status === 201 ? "created" : "replaced" });
        continue;
      }
      const problem = problemFrom(answer.response, answer.error);
      if (problem.status === 401 || problem.status === 503) throw problem; // the same for every entry
      results.push({ name, result: "failed", status: problem.status, detail: describe(problem) });
    }
    if (json) output.out(JSON.stringify(results, null, 2));
    else output.out(table(["name", "result", "detail"], results.map((r) => [r.name, r.result, r.detail ?? ""])));
    return results.some((r) => r.result === "failed") ? EXIT.failed : EXIT.ok;
  },
};

function readTypesFile(file: string, env: NodeJS.ProcessEnv): Array<[string, SignalTypeInput]> {
  let doc: unknown;
  try {
    doc = JSON.parse(fs.readFileSync(file, "utf8"));
  } catch (err) {
    throw new UsageError(`cannot read ${file}: ${(err as Error).message}`);
  }
  if (doc === null || typeof doc !== "object" || Array.isArray(doc)) throw new UsageError(`${file} must be a JSON object of {"<name>": <signal type>}`);
  return Object.entries(doc as Record<string, SignalTypeInput>).map(([name, entry]) => {
    const secrets = entry?.auth?.secrets;
    if (!Array.isArray(secrets)) return [name, entry];
    const resolved = secrets.map((s, i) => {
      if (typeof s !== "string" || !s.startsWith("env:")) return s;
      const value = env[s.slice(4)];
      if (!value) throw new UsageError(`${file}: entry '${name}', auth.secrets.${i}: environment variable ${s.slice(4)} is not set`);
      return value;
    });
    return [name, { ...entry, auth: { ...entry.auth, secrets: resolved } }];
  });
}

function describe(p: SignalboxProblem): string {
  const first = p.validation_errors[0];
  return first ? `${p.status}: ${first.path || "(root)"}: ${first.message}` : `${p.status}: ${p.detail || p.title}`;
}
