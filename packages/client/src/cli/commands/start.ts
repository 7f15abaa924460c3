import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { stringFlag, type Command } from "../command.ts";
import { UsageError } from "../exit-codes.ts";

export const start: Command = {
  name: ["start"],
  summary: "run the signalbox service (HTTP API and job worker) in the foreground",
  args: "",
  arity: [0, 0],
  local: true,
  untilStopped: true,
  options: {
    port: { type: "string" },
    "data-dir": { type: "string" },
    "database-url": { type: "string" },
    "service-dir": { type: "string" },
  },
  help: `Runs the service as \`npm start\` does: migrations, then the API and the job worker, in one
process, until Ctrl-C or SIGTERM (it drains and exits 0). With no DATABASE_URL it starts an
embedded Postgres under the data dir, and with no SIGNALBOX_API_KEYS it generates a key into
it, which the other commands find when run from the same directory. Every setting of the
service's README (Configuration) is read from the environment; these flags set the usual ones.

Options:
  --port N               PORT (default 8080)
  --data-dir DIR         SIGNALBOX_DATA_DIR (default ./.signalbox)
  --database-url URL     DATABASE_URL: a Postgres 14+ server instead of the embedded one
  --service-dir DIR      the signalbox service checkout to run (default SIGNALBOX_SERVICE_DIR,
                         else the checkout this command belongs to, else the one around the
                         current directory). Needs Node.js 22.18 or newer (or the checkout's own).

Exit code: the service's (0 after a clean stop, 1 when it cannot start; the reason is printed).

Example:
  signalbox start --port 8080 &
  signalbox waits ls`,
  async run({ values, env, cwd }) {
    const dir = findService(stringFlag(values, "service-dir") ?? env.SIGNALBOX_SERVICE_DIR, cwd);
    const node = nodeFor(dir);
    const overrides: Record<string, string | undefined> = {
      PORT: stringFlag(values, "port"),
      SIGNALBOX_DATA_DIR: stringFlag(values, "data-dir"),
      DATABASE_URL: stringFlag(values, "database-url"),
    };
    const childEnv = { ...env, ...Object.fromEntries(Object.entries(overrides).filter(([, v]) => v !== undefined)) };
    // The service runs in a process group of its own, so that every request to stop reaches it
    // through this command, once: Ctrl-C, SIGINT or SIGTERM sent to this pid alone (a supervisor,
    // `kill -INT`), a closed terminal. Sharing this group, a Ctrl-C reached it straight from the
    // terminal, and passing that on too would be a second signal, which makes the service exit at
    // once without its clean stop; so SIGINT was not passed on, and one sent to this pid alone
    // was never heard. A second Ctrl-C is passed on as a second signal: stop now. On Windows
    // (no such groups; detached opens a new console there) Ctrl-C reaches the service by itself.
    const ownGroup = process.platform !== "win32";
    const child = spawn(node, [path.join(dir, "src", "main.ts")], { cwd, env: childEnv, stdio: "inherit", detached: ownGroup });
    const forward = () => child.kill("SIGTERM");
    const stopSignals: NodeJS.Signals[] = ownGroup ? ["SIGINT", "SIGTERM", "SIGHUP"] : ["SIGTERM"];
    for (const s of stopSignals) process.on(s, forward);
    // The child's own clean shutdown decides the exit code.
    const code = await new Promise<number>((resolve, reject) => {
      child.once("error", reject);
      child.once("exit", (exitCode, bySignal) => resolve(exitCode ?? (bySignal === "SIGINT" || bySignal === "SIGTERM" ? 0 : 1)));
    });
    for (const s of stopSignals) process.removeListener(s, forward);
    return code;
  },
};

/** A directory holding the signalbox service: its package.json is named "signalbox" and it has src/main.ts. */
function isService(dir: string): boolean {
  try {
    const pkg = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8")) as { name?: string };
    return pkg.name === "signalbox" && fs.existsSync(path.join(dir, "src", "main.ts"));
  } catch {
    return false;
  }
}

function findUp(from: string): string | undefined {
  for (let dir = path.resolve(from); ; dir = path.dirname(dir)) {
    if (isService(dir)) return dir;
    if (path.dirname(dir) === dir) return undefined;
  }
}

function findService(explicit: string | undefined, cwd: string): string {
  if (explicit !== undefined) {
    if (!isService(path.resolve(cwd, explicit))) throw new UsageError(`${explicit} is not a signalbox service checkout (no package.json named "signalbox" with src/main.ts)`);
    return path.resolve(cwd, explicit);
  }
  const found = findUp(path.dirname(fs.realpathSync(fileURLToPath(import.meta.url)))) ?? findUp(cwd);
  if (!found) throw new UsageError("no signalbox service found: run this inside a signalbox checkout, or give --service-dir (or SIGNALBOX_SERVICE_DIR)");
  return found;
}

/** This Node if it can run the service's TypeScript sources (22.18+), else the checkout's own (its `node` dev dependency). */
function nodeFor(dir: string): string {
  const [major = 0, minor = 0] = process.versions.node.split(".").map(Number);
  if (major > 22 || (major === 22 && minor >= 18)) return process.execPath;
  const bundled = path.join(dir, "node_modules", ".bin", "node");
  if (fs.existsSync(bundled)) return bundled;
  throw new UsageError(`signalbox start needs Node.js 22.18 or newer (this is ${process.version}), or \`npm install\` in ${dir}`);
}
