import type { ParseArgsConfig } from "node:util";
import type { SignalboxClient } from "../client.ts";
import type { Output } from "./output.ts";

export type Options = NonNullable<ParseArgsConfig["options"]>;
type Values = Record<string, string | boolean | string[] | boolean[] | undefined>;

/** What a command gets: its parsed command line, a client, and where to write. */
export interface CommandInput {
  values: Values;
  positionals: string[];
  /** `--json`: print the API's JSON instead of tables. */
  json: boolean;
  /** A client for the signalbox the connection flags name (made on first use: `start` needs none). */
  client(): SignalboxClient;
  output: Output;
  env: NodeJS.ProcessEnv;
  cwd: string;
  /** Aborted on Ctrl-C: a command that runs until stopped (tail, start) ends cleanly; another may stop early. */
  signal: AbortSignal;
}

export interface Command {
  /** The words that name it: ["waits", "ls"]. */
  name: string[];
  /** One line for the list of commands. */
  summary: string;
  /** Arguments after the name, as shown in the usage line: "<run> <signal>". */
  args: string;
  /** How many positional arguments it takes. */
  arity: [min: number, max: number];
  options: Options;
  /** The options and examples part of its --help. */
  help: string;
  /** Does no network: skip the connection options in its help. */
  local?: boolean;
  /** Runs until stopped (tail, start): Ctrl-C is its normal end, exit 0. Any other command it cuts short (exit 130). */
  untilStopped?: boolean;
  /** Resolves with the exit code (default 0). */
  run(input: CommandInput): Promise<number | void>;
}

/** A string flag's value (the last one, if given twice). */
export function stringFlag(values: Values, name: string): string | undefined {
  const v = values[name];
  if (Array.isArray(v)) return v.length ? String(v[v.length - 1]) : undefined;
  return typeof v === "string" ? v : undefined;
}

export function listFlag(values: Values, name: string): string[] {
  const v = values[name];
  if (v === undefined) return [];
  return (Array.isArray(v) ? v : [v]).map(String);
}
