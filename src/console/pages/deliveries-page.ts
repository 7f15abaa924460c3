import { html } from "hono/html";
import type { Deps } from "../../deps.ts";
import { findFailingDeliveries, listStartDeliveries, listWaitDeliveries, toAttemptResource, toFailingDeliveryResource } from "../../delivery/list-deliveries.ts";
import { CONSOLE, csrfField, duration, notice, page, runLink, scrollTable, when, type Html, type PageFrame } from "../layout.ts";
import { REDELIVER_ALL_CAP, type DeliveryFilter } from "../redeliver-matching.ts";

const PAGE_SIZE = 25;
/** Attempts listed under each delivery; GET /waits/{id}/deliveries pages through the rest. */
const ATTEMPTS_SHOWN = 20;
const STATUSES = ["failed", "pending"] as const;
/** What GET /deliveries accepts for callback_host. */
const HOST = /^[A-Za-z0-9._~:[\]-]{1,300}$/;

type Delivery = ReturnType<typeof toFailingDeliveryResource>;
type Attempt = Pick<ReturnType<typeof toAttemptResource>, "attempt" | "started_at" | "status_code" | "error" | "duration_ms" | "outcome">;

export interface DeliveriesQuery extends DeliveryFilter {
  cursor?: string;
}

/** The filters in the page's URL (and in the redeliver forms, which send them back). */
export function parseDeliveriesQuery(params: URLSearchParams): { query: DeliveriesQuery; problems: string[] } {
  const problems: string[] = [];
  const query: DeliveriesQuery = {};
  const status = params.get("status")?.trim() ?? "";
  const found = STATUSES.find((s) => s === status);
  if (found) query.status = found;
  else if (status !== "") problems.push("Status: failed or pending.");
  const host = params.get("host")?.trim() ?? "";
  if (HOST.test(host)) query.callbackHost = host.toLowerCase();
  else if (host !== "") problems.push("Callback host: a host or host:port, e.g. engine.internal:9000.");
  const cursor = params.get("cursor")?.trim();
  if (cursor) query.cursor = cursor;
  return { query, problems };
}

export function deliveriesUrl(q: DeliveryFilter, extra: Record<string, string> = {}): string {
  const p = new URLSearchParams();
  if (q.status) p.set("status", q.status);
  if (q.callbackHost) p.set("host", q.callbackHost);
  for (const [k, v] of Object.entries(extra)) p.set(k, v);
  const s = p.toString();
  return `${CONSOLE}/deliveries${s ? `?${s}` : ""}`;
}

/** What the redirect after a redelivery says. */
function doneNotice(params: URLSearchParams): Html | string {
  const n = params.get("redelivered");
  if (n === null || !/^\d{1,6}$/.test(n)) return "";
  const skipped = Number(params.get("skipped") ?? 0) || 0;
  const more = params.get("more") === "1" ? ` Only ${REDELIVER_ALL_CAP} are sent per press: press again for the rest.` : "";
  return notice("ok", `${n} ${n === "1" ? "delivery was" : "deliveries were"} queued again.${skipped > 0 ? ` ${skipped} could not be (no callback any more).` : ""}${more}`);
}

export async function deliveriesPage(deps: Pick<Deps, "db">, params: URLSearchParams, frame: Omit<PageFrame, "title"> & { csrf: string }): Promise<{ status: 200 | 400; body: Html }> {
  const { query, problems } = parseDeliveriesQuery(params);
  const f = { ...frame, title: "Deliveries", section: "deliveries" as const };
  if (problems.length > 0) return { status: 400, body: page(f, html`<h1>Deliveries</h1>${problems.map((p) => notice("error", p))}${filterForm(query)}`) };
  const found = await findFailingDeliveries(deps, { status: query.status, callbackHost: query.callbackHost, limit: PAGE_SIZE, ...(query.cursor ? { cursor: query.cursor } : {}) });
  const attempts = await Promise.all(
    found.items.map((d) => (d.wait_id === null ? listStartDeliveries(deps, d.run_id, { limit: ATTEMPTS_SHOWN }) : listWaitDeliveries(deps, d.wait_id, { limit: ATTEMPTS_SHOWN }))),
  );
  const body = html`<h1>Deliveries</h1>
<p class="sub">Resume callbacks and run starts (<code>run.start</code> events of signal-with-start) failing now: <strong>failed</strong> (given up) and <strong>pending</strong> (a retry is due after a failed attempt), oldest last attempt first.</p>
${doneNotice(params)}
${filterForm(query)}
${found.items.length === 0
    ? html`<p>No delivery is failing${query.status || query.callbackHost ? " that matches" : ""}.</p>`
    : html`<form class="bulk" method="post" action="${CONSOLE}/deliveries/redeliver">
${csrfField(frame.csrf)}${query.status ? html`<input type="hidden" name="status" value="${query.status}">` : ""}${query.callbackHost ? html`<input type="hidden" name="host" value="${query.callbackHost}">` : ""}
<button type="submit">Redeliver all matching this filter</button> <span class="sub">(up to ${REDELIVER_ALL_CAP}, each with a fresh round of attempts)</span>
</form>
${found.items.map((d, i) => deliveryCard(d, attempts[i]!, query, frame.csrf))}`}
${found.next_cursor ? html`<p><a href="${deliveriesUrl(query, { cursor: found.next_cursor })}" rel="next">Next ${PAGE_SIZE}</a></p>` : ""}`;
  return { status: 200, body: page(f, body) };
}

function deliveryCard(d: Delivery, attempts: { items: Attempt[]; next_cursor: string | null }, q: DeliveryFilter, csrf: string): Html {
  // A run start has no wait: it is named by its run (one start per run).
  const subject = d.wait_id ?? `start of ${d.run_id}`;
  const heading = d.wait_id === null ? `d-start-${d.run_id}` : `d-${d.wait_id}`;
  const action = d.wait_id === null ? `${CONSOLE}/deliveries/starts/${encodeURIComponent(d.run_id)}/redeliver` : `${CONSOLE}/deliveries/${d.wait_id}/redeliver`;
  return html`<article class="card" aria-labelledby="${heading}">
<h2 id="${heading}"><span class="status status-${d.status}">${d.status}</span> ${d.wait_id === null ? "run.start: " : ""}${d.signal} <span class="sub">for run</span> ${runLink(d.run_id)}</h2>
<dl class="facts">
${d.wait_id === null ? html`<dt>Kind</dt><dd>run start (signal-with-start)</dd>` : html`<dt>Wait</dt><dd class="mono">${d.wait_id}</dd>`}
<dt>Callback host</dt><dd class="mono">${d.callback_host}</dd>
<dt>Last attempt</dt><dd>${when(d.last_attempt_at)}: ${d.last_error ?? (d.last_status_code === null ? "no answer" : `HTTP ${d.last_status_code}`)}</dd>
<dt>Attempts</dt><dd>${d.attempts}</dd>
</dl>
<details><summary>Each attempt${attempts.next_cursor ? ` (first ${ATTEMPTS_SHOWN})` : ""}</summary>
${scrollTable(`Attempts to deliver ${subject}`, attemptsTable(attempts.items))}
</details>
<form method="post" action="${action}">
${csrfField(csrf)}${q.status ? html`<input type="hidden" name="status" value="${q.status}">` : ""}${q.callbackHost ? html`<input type="hidden" name="host" value="${q.callbackHost}">` : ""}
<button type="submit" aria-label="Redeliver ${d.signal} for run ${d.run_id}">Redeliver</button>
</form>
</article>`;
}

function attemptsTable(items: Attempt[]): Html {
  return html`<table>
<thead><tr><th scope="col">#</th><th scope="col">Started</th><th scope="col">Status</th><th scope="col">Error</th><th scope="col">Took</th><th scope="col">Outcome</th></tr></thead>
<tbody>${items.map(
    (a) => html`<tr><td>${a.attempt}</td><td>${when(a.started_at)}</td><td>${a.status_code ?? "—"}</td><td>${a.error ?? "—"}</td><td>${a.duration_ms < 1000 ? `${a.duration_ms} ms` : duration(a.duration_ms)}</td><td>${a.outcome}</td></tr>`,
  )}</tbody>
</table>`;
}

function filterForm(q: DeliveriesQuery): Html {
  return html`<form class="filters" method="get" action="${CONSOLE}/deliveries" role="search" aria-label="Filter deliveries">
<div class="field"><label for="d-status">Status</label><select id="d-status" name="status"><option value="">failed and pending</option>${STATUSES.map((s) => html`<option${s === q.status ? html` selected` : ""}>${s}</option>`)}</select></div>
<div class="field"><label for="d-host">Callback host</label><input id="d-host" name="host" value="${q.callbackHost ?? ""}" placeholder="engine.internal:9000" maxlength="300"></div>
<div class="actions"><button type="submit">Filter</button> <a href="${CONSOLE}/deliveries">Clear</a></div>
</form>`;
}
