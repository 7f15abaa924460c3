import fs from "node:fs";
import { problemFrom } from "../../http.ts";
import { describeCause, SignalboxConnectionError, SignalboxProblem } from "../../problem.ts";
import type { SignalTypeInput } from "../../types.ts";
import type { Command } from "../command.ts";
import { EXIT, exitCodeOf, UsageError } from "../exit-codes.ts";
import { rowByRow } from "../output.ts";

export const typesApply: Command = {
  name: ["types", "apply"],
  summary: "declare the signal types of a JSON file (create or replace each)",
  args: "<file>",
  arity: [1, 1],
  options: {},
  help: `The file has the format of SIGNALBOX_SIGNAL_TYPES_FILE: {"<name>": <signal type>, ...},
each entry the body of PUT /signal-types/{name}. A secret written "env:NAME" is read from that
environment variable here, so the file holds no secret. Every entry is applied, even after one
fails; the exit code is 1 if any failed. Each is printed as it is applied. When signalbox stops
answering part way (unreachable, 503, 401) the rest are not sent: they are listed as not_applied,
the error names the entries applied and those not, and the exit code is 3 (1 for a 401). Applying
the file again is safe.

Options:
  --json   one result per entry: {"name", "result": "created" | "replaced" | "failed" |
           "not_applied" | "unknown" (sent, no answer), ...}, printed at the end

Example file:
  {
    "manager-approval": {"schema": {"type": "object", "required": ["approved"]}, "auth": {"scheme": "none"}},
    "payment": {"auth": {"scheme": "standard-webhooks", "secrets": ["env:PAYMENT_WEBHOOK_SECRET"]}, "buffer_ttl_s": 3600}
  }`,
  async run({ positionals, json, client, output, env }) {
    const entries = readTypesFile(positionals[0]!, env);
    const results: Result[] = [];
    const api = client().api;
    // Each row as soon as its entry is done: what was applied stays on the screen whatever stops the rest.
    const row = rowByRow(["name", "result", "detail"], [entries.map(([name]) => name), RESULTS], output.out);
    const record = (r: Result) => {
      results.push(r);
      if (!json) row([r.name, r.result, r.detail ?? ""]);
    };
    /** Nothing else will get through either: the entries after the one in flight are not sent. */
    const stop = (err: SignalboxProblem | SignalboxConnectionError, inFlight: Result): number => {
      if (results.length === 0) throw err; // nothing done yet: the error says it all
      record(inFlight);
      for (const [name] of entries.slice(results.length)) record({ name, result: "not_applied" });
      if (json) output.out(JSON.stringify(results, null, 2));
      output.err(`error: ${err.message}`);
      output.err(`  ${summary(results)}`);
      output.err("  (each entry is created or replaced: applying the file again is safe)");
      return exitCodeOf(err);
    };
    for (const [name, body] of entries) {
      let answer;
      try {
        answer = await api.PUT("/signal-types/{name}", { params: { path: { name } }, body });
      } catch (err) {
        const cause = describeCause(err);
        // Refused or not found, the request never left; otherwise it may have been applied unanswered.
        const result = NEVER_SENT.has(cause) ? "not_applied" : "unknown";
        return stop(new SignalboxConnectionError(client().baseUrl, err), { name, result, detail: `no answer: ${cause}` });
      }
      if (answer.response.ok) {
        record({ name, result: answer.response.status === 201 ? "created" : "replaced" });
        continue;
      }
      const problem = problemFrom(answer.response, answer.error);
      // The same for every entry.
      if (problem.status === 401 || problem.status === 503) return stop(problem, { name, result: "not_applied", status: problem.status, detail: describe(problem) });
      record({ name, result: "failed", status: problem.status, detail: describe(problem) });
    }
    if (json) output.out(JSON.stringify(results, null, 2));
    return results.some((r) => r.result === "failed") ? EXIT.failed : EXIT.ok;
  },
};

type Result = { name: string; result: (typeof RESULTS)[number]; status?: number; detail?: string };
const RESULTS = ["created", "replaced", "failed", "not_applied", "unknown"] as const;
/** Connection errors after which the request is known not to have reached signalbox. */
const NEVER_SENT = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN"]);

/** "applied: a, b; not applied: c, d", and the entry whose answer never came, if any. */
function summary(results: Result[]): string {
  const names = (...kinds: Result["result"][]) => results.filter((r) => kinds.includes(r.result)).map((r) => r.name).join(", ") || "none";
  const unknown = results.some((r) => r.result === "unknown") ? `; unknown (sent, no answer): ${names("unknown")}` : "";
  return `applied: ${names("created", "replaced")}; not applied: ${names("failed", "not_applied")}${unknown}`;
}

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
