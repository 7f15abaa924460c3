// The program: `bin/signalbox.js` imports this. Separate from main.ts so tests can call runCli
// without running a command line at import.
import { runCli } from "./main.ts";
import { processOutput } from "./output.ts";

const stop = new AbortController();
// The first Ctrl-C ends a command that runs until stopped (tail) cleanly; a second one exits.
process.once("SIGINT", () => {
  stop.abort();
  process.once("SIGINT", () => process.exit(130));
});
process.exitCode = await runCli({ argv: process.argv.slice(2), env: process.env, cwd: process.cwd(), output: processOutput, signal: stop.signal });
