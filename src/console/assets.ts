import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";

/**
 * The console's stylesheet and its one script, served from the package (never a CDN). Each URL
 * carries a digest of the file, so browsers may keep it for a year: a changed file is a new URL.
 */
interface Asset {
  body: Buffer;
  type: string;
}

const load = (file: string, type: string) => {
  const body = readFileSync(new URL(`./assets/${file}`, import.meta.url));
  const digest = createHash("sha256").update(body).digest("hex").slice(0, 12);
  const [stem, ext] = file.split(".");
  return { name: `${stem}.${digest}.${ext}`, asset: { body, type } satisfies Asset };
};

const css = load("console.css", "text/css; charset=utf-8");
const js = load("console.js", "text/javascript; charset=utf-8");
// Served, so a browser does not ask for /favicon.ico (a management path, 401 without a token).
const icon = load("favicon.svg", "image/svg+xml");

export const ASSETS_PREFIX = "/console/assets/";
export const ASSET_PATHS = { css: ASSETS_PREFIX + css.name, js: ASSETS_PREFIX + js.name, icon: ASSETS_PREFIX + icon.name };
export const ASSETS = new Map<string, Asset>([
  [css.name, css.asset],
  [js.name, js.asset],
  [icon.name, icon.asset],
]);
