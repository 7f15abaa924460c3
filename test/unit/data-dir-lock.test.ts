import { spawn } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, expect, it } from "vitest";
import { NODE } from "../helpers/service-process.ts";
import { waitFor } from "../helpers/wait-for.ts";

const lockModule = path.resolve(import.meta.dirname, "../../src/db/data-dir-lock.ts");
let dir: string;
afterAll(() => fs.rm(dir, { recursive: true, force: true }));

/** A process that tries to lock `dataDir`, says how it went, and holds what it got until stdin closes. */
function contender(dataDir: string) {
  const script = `
    import { lockDataDir } from ${JSON.stringify(lockModule)};
    try { lockDataDir(${JSON.stringify(dataDir)}); console.log("won"); }
    catch (err) { console.log(err.name === "DataDirInUseError" ? "in use" : "error: " + err.message); }
    process.stdin.resume();`;
  const child = spawn(NODE, ["--input-type=module", "-e", script], { stdio: ["pipe", "pipe", "inherit"] });
  let out = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  let exitedFlag = false;
  const exited = new Promise<void>((resolve) => child.once("close", () => ((exitedFlag = true), resolve())));
  const answered = waitFor("a contender's answer", () => (out.includes("\n") ? out.trim() : undefined), {
    gaveUp: () => (exitedFlag ? "it exited without one" : undefined),
  }).then((answer) => answer!);
  return { answered, exited, done: () => child.stdin.end() };
}

it("contenders for a data dir whose holder died: exactly one takes it", async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), "signalbox-lock-"));
  // The lock of a process that is gone (pid 2^22 - 1 is above Linux's default pid_max).
  await fs.writeFile(path.join(dir, "signalbox.lock.3"), JSON.stringify({ pid: 4194303, started: "1" }));
  for (let round = 0; round < 3; round++) {
    const contenders = Array.from({ length: 6 }, () => contender(dir));
    const answers = await Promise.all(contenders.map((c) => c.answered));
    expect(answers.sort()).toEqual(["in use", "in use", "in use", "in use", "in use", "won"]);
    contenders.forEach((c) => c.done()); // the winner exits without releasing: a stale lock for the next round
    await Promise.all(contenders.map((c) => c.exited));
  }
  const left = (await fs.readdir(dir)).filter((f) => f.includes("lock"));
  expect(left).toHaveLength(1); // the newest number only; drafts are gone
}, 30_000);
