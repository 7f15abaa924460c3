import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { UsageError } from "./exit-codes.ts";

export interface Connection {
  url: string;
  token: string | undefined;
}

/** The flags every command takes to say which signalbox to talk to. */
export const CONNECTION_OPTIONS = {
  url: { type: "string" },
  token: { type: "string" },
  profile: { type: "string" },
  config: { type: "string" },
} as const;

export const CONNECTION_HELP = `Connection (first found wins):
  --url URL          signalbox's address; else SIGNALBOX_URL, the profile's "url", http://localhost:8080
  --token TOKEN      management token; else SIGNALBOX_TOKEN, the profile's "token", and for a
                     signalbox on this machine the key it generated (./.signalbox/api-key)
  --profile NAME     profile to use; else SIGNALBOX_PROFILE, "default"
  --config FILE      profile file; else SIGNALBOX_CONFIG, ~/.config/signalbox/config.json:
                     {"profiles": {"default": {"url": "...", "token": "env:MY_TOKEN"}}}
                     (a token written "env:NAME" is read from that variable)`;

interface Profile {
  url?: string;
  token?: string;
}

/** Resolves where to connect and with which token: flags, then environment, then the profile file. */
export function resolveConnection(flags: { url?: string; token?: string; profile?: string; config?: string }, env: NodeJS.ProcessEnv, cwd: string): Connection {
  const profile = readProfile(flags, env);
  const url = flags.url ?? env.SIGNALBOX_URL ?? profile.url ?? "http://localhost:8080";
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new UsageError(`not a URL: ${withoutUserinfo(url)}`);
  }
  // fetch refuses such a URL, and the error would print it, password and all (into CI logs).
  if (parsed.username || parsed.password) {
    throw new UsageError(
      `the URL has a user name or password in it (${withoutUserinfo(url)}, shown without them): signalbox takes a token (--token, SIGNALBOX_TOKEN), not URL credentials`,
    );
  }
  const token = flags.token ?? env.SIGNALBOX_TOKEN ?? fromEnvReference(profile.token, env) ?? generatedLocalKey(url, env, cwd);
  return { url, token };
}

/** A URL for messages: any `user:password@` taken out, even of a URL that does not parse. */
function withoutUserinfo(url: string): string {
  return url.replace(/^([^:/?#]+:\/\/)[^/?#]*@/, "$1");
}

function readProfile(flags: { profile?: string; config?: string }, env: NodeJS.ProcessEnv): Profile {
  const explicitFile = flags.config ?? env.SIGNALBOX_CONFIG;
  const file = explicitFile ?? path.join(env.XDG_CONFIG_HOME ?? path.join(os.homedir(), ".config"), "signalbox", "config.json");
  const name = flags.profile ?? env.SIGNALBOX_PROFILE;
  let text: string;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch (err) {
    // No file is fine unless one was named, or a profile was asked for by name.
    if ((err as NodeJS.ErrnoException).code === "ENOENT" && !explicitFile && name === undefined) return {};
    throw new UsageError(`cannot read the profile file ${file}: ${(err as Error).message}`);
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new UsageError(`the profile file ${file} is not JSON: ${(err as Error).message}`);
  }
  const profile = profileIn(doc, name ?? "default", file);
  if (profile === undefined && name !== undefined) throw new UsageError(`no profile "${name}" in ${file}`);
  return profile ?? {};
}

/** The named profile of a parsed profile file, checked field by field: JSON can hold anything. */
function profileIn(doc: unknown, name: string, file: string): Profile | undefined {
  const malformed = (what: string) => new UsageError(`the profile file ${file} is malformed: ${what}`);
  if (!isObject(doc)) throw malformed(`it is not an object ({"profiles": {...}})`);
  if (doc.profiles === undefined) return undefined;
  if (!isObject(doc.profiles)) throw malformed(`"profiles" is not an object`);
  const profile = Object.hasOwn(doc.profiles, name) ? doc.profiles[name] : undefined;
  if (profile === undefined) return undefined;
  if (!isObject(profile)) throw malformed(`"profiles.${name}" is not an object`);
  for (const field of ["url", "token"]) {
    if (profile[field] !== undefined && typeof profile[field] !== "string") throw malformed(`"profiles.${name}.${field}" is not a string`);
  }
  return profile as Profile;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function fromEnvReference(value: string | undefined, env: NodeJS.ProcessEnv): string | undefined {
  if (value === undefined || !value.startsWith("env:")) return value;
  const resolved = env[value.slice(4)];
  if (!resolved) throw new UsageError(`the profile's token names ${value.slice(4)}, which is not set`);
  return resolved;
}

/**
 * `npm start` / `signalbox start` with no SIGNALBOX_API_KEYS generate a key into the data dir:
 * for a signalbox on this machine, started from this directory, use it, so the commands work
 * with no setup at all.
 */
function generatedLocalKey(url: string, env: NodeJS.ProcessEnv, cwd: string): string | undefined {
  const host = new URL(url).hostname;
  if (host !== "localhost" && host !== "127.0.0.1" && host !== "[::1]") return undefined;
  try {
    return fs.readFileSync(path.resolve(cwd, env.SIGNALBOX_DATA_DIR ?? ".signalbox", "api-key"), "utf8").trim() || undefined;
  } catch {
    return undefined;
  }
}
