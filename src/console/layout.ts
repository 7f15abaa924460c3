import { html } from "hono/html";
import type { HtmlEscapedString } from "hono/utils/html";
import { ASSET_PATHS } from "./assets.ts";

/**
 * Every console page is built from `html` templates: interpolations are escaped by hono, so a
 * wait's metadata or a payload can never become markup. `raw()` is not used on anything that
 * came from a request or the database.
 */
export type Html = HtmlEscapedString | Promise<HtmlEscapedString>;

export const CONSOLE = "/console";

export interface PageFrame {
  title: string;
  /** The signed-in operator; absent on the sign-in page. */
  who?: string;
  /** Sign-out is a state change: it carries the session's CSRF token. */
  csrf?: string;
  /** Which navigation entry is current. */
  section?: "overview" | "waits" | "approvals" | "runs" | "signals" | "deliveries" | "signal-types";
}

const NAV: Array<{ section: NonNullable<PageFrame["section"]>; href: string; label: string }> = [
  { section: "overview", href: `${CONSOLE}/overview`, label: "Overview" },
  { section: "waits", href: `${CONSOLE}/waits`, label: "Pending waits" },
  { section: "approvals", href: `${CONSOLE}/approvals`, label: "Approvals" },
  { section: "signals", href: `${CONSOLE}/signals`, label: "Signal log" },
  { section: "deliveries", href: `${CONSOLE}/deliveries`, label: "Deliveries" },
  { section: "signal-types", href: `${CONSOLE}/signal-types`, label: "Signal types" },
];

export function page(frame: PageFrame, body: Html): Html {
  return html`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>${frame.title} · signalbox console</title>
<link rel="icon" href="${ASSET_PATHS.icon}" type="image/svg+xml">
<link rel="stylesheet" href="${ASSET_PATHS.css}">
<script src="${ASSET_PATHS.js}" defer></script>
</head>
<body>
<header class="top">
<a class="brand" href="${CONSOLE}/overview">signalbox</a>
${frame.who !== undefined
    ? html`<nav aria-label="Console">
<ul>${NAV.map((n) => html`<li><a href="${n.href}"${n.section === frame.section ? html` aria-current="page"` : ""}>${n.label}</a></li>`)}</ul>
</nav>
<form class="sign-out" method="post" action="${CONSOLE}/sign-out">
<input type="hidden" name="_csrf" value="${frame.csrf ?? ""}">
<span class="who">${frame.who}</span> <button type="submit" class="link">Sign out</button>
</form>`
    : ""}
</header>
<main id="main">
${body}
</main>
</body>
</html>
`;
}

/** The hidden field every state-changing form carries. */
export const csrfField = (token: string) => html`<input type="hidden" name="_csrf" value="${token}">`;

/** An instant, as UTC text in a <time> element. */
export function when(d: Date | string | null | undefined): Html | string {
  if (d === null || d === undefined) return "—";
  const date = typeof d === "string" ? new Date(d) : d;
  return html`<time datetime="${date.toISOString()}">${date.toISOString().replace("T", " ").replace(/\.\d{3}Z$/, " UTC")}</time>`;
}

/** A duration in the largest two units that matter: "3 d 4 h", "12 min 5 s". */
export function duration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  const units: Array<[string, number]> = [["d", 86400], ["h", 3600], ["min", 60], ["s", 1]];
  const parts: string[] = [];
  let rest = s;
  for (const [name, size] of units) {
    const n = Math.floor(rest / size);
    rest -= n * size;
    if (n > 0 || (parts.length > 0 && parts.length < 2)) parts.push(`${n} ${name}`);
    if (parts.length === 2) break;
  }
  return parts.length > 0 ? parts.join(" ") : "0 s";
}

/** JSON for people: indented, in a <pre> (escaped like everything else). */
export const prettyJson = (value: unknown) => html`<pre class="json">${JSON.stringify(value, null, 2)}</pre>`;

/** A wide table that scrolls sideways on a narrow screen; focusable so keyboards can scroll it. */
export const scrollTable = (label: string, table: Html) => html`<div class="table-wrap" role="region" aria-label="${label}" tabindex="0">${table}</div>`;

export const runLink = (runId: string) => html`<a href="${CONSOLE}/runs/${encodeURIComponent(runId)}">${runId}</a>`;

/** Metadata as key=value chips. */
export function metadataList(metadata: Record<string, unknown>): Html | string {
  const entries = Object.entries(metadata);
  if (entries.length === 0) return "—";
  return html`<ul class="chips">${entries.map(([k, v]) => html`<li><span class="k">${k}</span>=<span class="v">${typeof v === "string" ? v : JSON.stringify(v)}</span></li>`)}</ul>`;
}

/** A one-line notice (an error says so to screen readers at once). */
export const notice = (kind: "error" | "ok", text: string) => html`<p class="notice ${kind}" role="${kind === "error" ? "alert" : "status"}">${text}</p>`;
