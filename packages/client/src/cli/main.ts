// `signalbox`: the command line for operators and scripts. One file per command under
// commands/; this one finds the command, parses its flags, runs it and turns what went wrong
// into a message and a documented exit code.
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { createClient, type SignalboxClient } from "../client.ts";
import { SignalboxConnectionError, SignalboxProblem } from "../problem.ts";
import type { Command } from "./command.ts";
import { deliveriesLs } from "./commands/deliveries-ls.ts";
import { redeliver } from "./commands/redeliver.ts";
import { redrive } from "./commands/redrive.ts";
import { send } from "./commands/send.ts";
import { start } from "./commands/start.ts";
import { tail } from "./commands/tail.ts";
import { typesApply } from "./commands/types-apply.ts";
import { waitsLs } from "./commands/waits-ls.ts";
import { waitsShow } from "./commands/waits-show.ts";
import { CONNECTION_HELP, CONNECTION_OPTIONS, resolveConnection } from "./config.ts";
import { EXIT, EXIT_CODES_HELP, exitCodeOf, UsageError } from "./exit-codes.ts";
import type { Output } from "./output.ts";

const COMMANDS: Command[] = [start, typesApply, waitsLs, waitsShow, send, tail, deliveriesLs, redeliver, redrive];
const COMMON_OPTIONS = { ...CONNECTION_OPTIONS, json: { type: "boolean" }, help: { type: "boolean", short: "h" } } as const;

export interface Invocation {
  argv: string[];
  env: NodeJS.ProcessEnv;
  cwd: string;
  output: Output;
  signal: AbortSignal;
}

/** Runs one command line; resolves with the exit code. Never throws. */
export async function runCli({ argv, env, cwd, output, signal }: Invocation): Promise<number> {
  if (argv.length === 0 || argv[0] === "help" || argv[0] === "--help" || argv[0] === "-h") {
    output.out(overallHelp());
    return argv.length === 0 ? EXIT.usage : EXIT.ok;
  }
  if (argv[0] === "--version") {
    output.out(VERSION);
    return EXIT.ok;
  }
  const command = COMMANDS.find((c) => c.name.every((word, i) => argv[i] === word));
  if (!command) {
    output.err(`error: unknown command "${argv.filter((a) => !a.startsWith("-")).slice(0, 2).join(" ")}"\n\n${overallHelp()}`);
    return EXIT.usage;
  }

  let json = false;
  try {
    const { values, positionals } = parseArgs({
      args: argv.slice(command.name.length),
      options: { ...command.options, ...COMMON_OPTIONS },
      allowPositionals: true,
      strict: true,
    });
    if (values.help) {
      output.out(commandHelp(command));
      return EXIT.ok;
    }
    json = values.json === true;
    const [min, max] = command.arity;
    if (positionals.length < min) throw new UsageError(`missing ${command.args.split(" ").slice(positionals.length).join(" ")}`);
    if (positionals.length > max) throw new UsageError(`unexpected argument "${positionals[max]}"`);

    let client: SignalboxClient | undefined;
    const connect = () => {
      const { url, token } = resolveConnection(values as Record<string, string | undefined>, env, cwd);
      return createClient({ baseUrl: url, ...(token ? { token } : {}) });
    };
    const code = await command.run({
      values,
      positionals,
      json,
      client: () => (client ??= connect()),
      output,
      env,
      cwd,
      signal,
    });
    return code ?? EXIT.ok;
  } catch (err) {
    if (signal.aborted) {
      // Ctrl-C is how a command that runs until stopped (tail) ends: done. Any other it cut short,
      // which a script must not take for success: `send` may not have been accepted.
      if (command.untilStopped && !(err instanceof SignalboxProblem)) return EXIT.ok;
      output.err(`error: interrupted (Ctrl-C) before signalbox ${command.name.join(" ")} finished`);
      if (!isAbort(err)) report(err, command, json, output);
      return EXIT.interrupted;
    }
    const mistake = isParseArgsError(err) ? new UsageError((err as Error).message) : err;
    report(mistake, command, json, output);
    return exitCodeOf(mistake);
  }
}

function report(err: unknown, command: Command, json: boolean, output: Output): void {
  if (err instanceof SignalboxProblem) {
    // With --json the problem document goes to stdout too, so a script can read outcome and validation_errors.
    if (json) output.out(JSON.stringify(err.body, null, 2));
    output.err(`error: ${err.message}`);
    if (err.outcome) output.err(`  outcome: ${err.outcome}`);
    for (const v of err.validation_errors) output.err(`  ${v.path || "(root)"}: ${v.message}`);
    if (err.status === 401) output.err("  (check --token, SIGNALBOX_TOKEN or the profile's token)");
    return;
  }
  if (err instanceof SignalboxConnectionError) return output.err(`error: ${err.message}`);
  if (err instanceof UsageError) {
    output.err(`error: ${err.message}\nusage: ${usage(command)}\n(signalbox ${command.name.join(" ")} --help for more)`);
    return;
  }
  output.err(`error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
}

/** The error an aborted fetch or pause throws (the signal's reason). */
function isAbort(err: unknown): boolean {
  return (err as { name?: unknown })?.name === "AbortError";
}

function isParseArgsError(err: unknown): boolean {
  return typeof (err as { code?: unknown })?.code === "string" && (err as { code: string }).code.startsWith("ERR_PARSE_ARGS_");
}

function usage(c: Command): string {
  return `signalbox ${c.name.join(" ")}${c.args ? ` ${c.args}` : ""} [options]`;
}

function commandHelp(c: Command): string {
  const common = c.local ? "" : `\n\n${CONNECTION_HELP}`;
  return `${c.summary}\n\nusage: ${usage(c)}\n\n${c.help}${common}\n\n${EXIT_CODES_HELP}`;
}

function overallHelp(): string {
  const width = Math.max(...COMMANDS.map((c) => `${c.name.join(" ")} ${c.args}`.length));
  const lines = COMMANDS.map((c) => `  ${`${c.name.join(" ")} ${c.args}`.padEnd(width)}  ${c.summary}`);
  return `signalbox: the command line of the signalbox signal broker

usage: signalbox <command> [arguments] [options]

Commands:
${lines.join("\n")}

Every command takes --help, and --json for JSON output instead of tables.

${CONNECTION_HELP}

${EXIT_CODES_HELP}`;
}

/** The package's version: package.json is two folders up from both src/cli/ and dist/cli/. */
const VERSION = (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }).version;
