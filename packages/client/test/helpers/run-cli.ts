import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { waitFor } from "../../../../test/helpers/wait-for.ts";

const packageDir = path.resolve(import.meta.dirname, "../..");
const repoBin = path.resolve(packageDir, "../../node_modules/.bin");
/** The installed command, as npm linked it (`node_modules/.bin/signalbox`), not a file of the package. */
export const SIGNALBOX_BIN = path.join(repoBin, "signalbox");

/** A home with no profile file: the tests' environment is the only configuration. */
const emptyHome = fs.mkdtempSync(path.join(os.tmpdir(), "sbx-cli-home-"));

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Spawns the command with only the environment given (Node 24 first on PATH, as `npx` has it). */
export function spawnCli(args: string[], env: Record<string, string> = {}, cwd = emptyHome): ChildProcess {
  return spawn(SIGNALBOX_BIN, args, {
    cwd,
    env: { PATH: `${repoBin}:${process.env.PATH}`, HOME: emptyHome, XDG_CONFIG_HOME: path.join(emptyHome, ".config"), ...env },
    stdio: ["pipe", "pipe", "pipe"],
  });
}

/** Runs `signalbox <args>` to its end. */
export async function runCli(args: string[], opts: { env?: Record<string, string>; stdin?: string; cwd?: string } = {}): Promise<CliResult> {
  const child = spawnCli(args, opts.env, opts.cwd);
  const out = collect(child);
  child.stdin!.end(opts.stdin ?? "");
  const code = await new Promise<number | null>((resolve) => child.once("close", (c) => resolve(c)));
  return { code, stdout: out.stdout(), stderr: out.stderr() };
}

export function collect(child: ChildProcess) {
  let stdout = "";
  let stderr = "";
  child.stdout!.on("data", (d: Buffer) => (stdout += d.toString("utf8")));
  child.stderr!.on("data", (d: Buffer) => (stderr += d.toString("utf8")));
  return { stdout: () => stdout, stderr: () => stderr };
}

/** Resolves with stdout once it has a line matching `pattern`. */
export function outputLine(child: ChildProcess, out: ReturnType<typeof collect>, pattern: RegExp, what: string): Promise<string> {
  let exited = false;
  child.once("close", () => (exited = true));
  return waitFor(what, () => out.stdout(), {
    until: (text) => text.split("\n").some((l) => pattern.test(l)),
    gaveUp: () => (exited ? "the command exited" : undefined),
    context: () => `stdout:\n${out.stdout()}\nstderr:\n${out.stderr()}`,
  });
}
