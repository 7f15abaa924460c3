import { readFileSync } from "node:fs";
import { gzipSync } from "node:zlib";

/**
 * The API reference at /docs works with no internet: Scalar's standalone bundle is served from
 * the installed @scalar/api-reference package (never its CDN), and the page asks nothing of
 * Scalar's hosted services. The bundle's URL names the package version, so browsers may keep it.
 */
const packageDir = new URL("../", import.meta.resolve("@scalar/api-reference"));
const version = (JSON.parse(readFileSync(new URL("package.json", packageDir), "utf8")) as { version: string }).version;

export const DOCS_BUNDLE_PATH = `/docs/scalar-api-reference-${version}.js`;

/**
 * What the reference is told (Scalar's configuration): the document from this server; no
 * "open in client", developer toolbar (deploy, share), agent chat, telemetry or font CDN.
 */
export const DOCS_CONFIGURATION = {
  url: "/openapi.json",
  pageTitle: "signalbox API",
  cdn: DOCS_BUNDLE_PATH,
  hideClientButton: true,
  showDeveloperTools: "never",
  telemetry: false,
  withDefaultFonts: false,
  agent: { disabled: true },
  mcp: { disabled: true },
  documentDownloadType: "json",
} as const;

export interface DocsBundle {
  body: Buffer;
  gzip: Buffer;
}

let bundle: DocsBundle | undefined;

/** The bundle, read and compressed once (on first use: most processes never serve it). */
export function docsBundle(): DocsBundle {
  if (!bundle) {
    const body = readFileSync(new URL("dist/browser/standalone.js", packageDir));
    bundle = { body, gzip: gzipSync(body, { level: 6 }) };
  }
  return bundle;
}
