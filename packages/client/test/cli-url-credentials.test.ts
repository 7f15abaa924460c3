// A signalbox behind a proxy with Basic auth is often written http://user:password@host. fetch
// cannot send such a URL: the command printed the password (stderr ends up in CI logs) and
// exited 3 ("unreachable: try again later"), after retrying, instead of a usage error that
// keeps the password to itself.
import { describe, expect, it } from "vitest";
import { createClient } from "../src/index.ts";
import { runCli } from "./helpers/run-cli.ts";

describe("a signalbox URL with credentials in it", () => {
  it("is a usage error of the command (exit 2) that does not print the password", async () => {
    const res = await runCli(["waits", "ls"], { env: { SIGNALBOX_URL: "http://admin:hunter2-s3cret@127.0.0.1:1" } });
    expect({ code: res.code, leaksPassword: (res.stdout + res.stderr).includes("hunter2-s3cret") }, res.stderr).toEqual({ code: 2, leaksPassword: false });
    const flag = await runCli(["waits", "ls", "--url", "http://admin:hunter2-s3cret@127.0.0.1:1"]);
    expect({ code: flag.code, leaksPassword: (flag.stdout + flag.stderr).includes("hunter2-s3cret") }, flag.stderr).toEqual({ code: 2, leaksPassword: false });
  });

  it("does not print the password of a URL it cannot parse either", async () => {
    const res = await runCli(["waits", "ls", "--url", "http://admin:hunter2-s3cret@127.0.0.1:port"]);
    expect({ code: res.code, leaksPassword: (res.stdout + res.stderr).includes("hunter2-s3cret") }, res.stderr).toEqual({ code: 2, leaksPassword: false });
  });

  it("is refused by createClient, without the password in the message", () => {
    let message = "";
    try {
      createClient({ baseUrl: "http://admin:hunter2-s3cret@127.0.0.1:1" });
    } catch (err) {
      message = (err as Error).message;
    }
    expect({ refused: message !== "", leaksPassword: message.includes("hunter2-s3cret") }).toEqual({ refused: true, leaksPassword: false });
  });
});
