import { execFileSync } from "node:child_process";
import fs from "node:fs";

/**
 * A process as the kernel knows it: its pid and when it started. The start stamp tells a live
 * process apart from a later one that was given the same pid (after a reboot, or in a container,
 * where the same pids come back on every start).
 */
export interface ProcessIdentity {
  pid: number;
  started: string;
}

/** When `pid` started, or undefined when no such process runs. */
export function processStartStamp(pid: number): string | undefined {
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  if (process.platform === "linux") {
    try {
      // Field 22 (starttime, clock ticks since boot); the command name (field 2) may hold spaces and ')'.
      const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
      return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
    } catch {
      return undefined;
    }
  }
  try {
    const stamp = execFileSync("ps", ["-o", "lstart=", "-p", String(pid)], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
    return stamp || undefined;
  } catch {
    return undefined;
  }
}

/** True when the process described still runs (the same pid and the same start). */
export function isRunning(p: ProcessIdentity): boolean {
  const started = processStartStamp(p.pid);
  return started !== undefined && started === p.started;
}

export function currentProcess(): ProcessIdentity {
  return { pid: process.pid, started: processStartStamp(process.pid) ?? "" };
}
