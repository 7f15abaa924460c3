import fs from "node:fs";
import { chromium, type Browser } from "playwright-core";

/** Debian's chromium (`apt-get install chromium`; .ci/run installs it when missing). */
export const CHROMIUM = "/usr/bin/chromium";
export const hasChromium = fs.existsSync(CHROMIUM);

/** Headless Chromium that makes no request of its own (no updates, sync or background fetches). */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
}
