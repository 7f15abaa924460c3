import { html } from "hono/html";
import type { Deps } from "../../deps.ts";
import { findWaits } from "../../waits/find-waits.ts";
import type { WaitResource } from "../../waits/wait-view.ts";
import { CONSOLE, duration, metadataList, notice, page, runLink, scrollTable, when, type Html, type PageFrame } from "../layout.ts";
import { filterText, parseInstant, parseMetadataPairs, parseSignalAndRun, toInputInstant } from "../query-values.ts";

export const WAIT_KINDS = ["external", "timer", "sensor", "all", "any"] as const;
const PAGE_SIZE = 50;

export interface WaitsQuery {
  signal?: string;
  run?: string;
  /** key=value pairs, all of which must match. */
  metadata: Array<[string, string]>;
  deadlineBefore?: Date;
  deadlineAfter?: Date;
  kind?: (typeof WAIT_KINDS)[number];
  cursor?: string;
}

/** The filters in the page's URL; a malformed one is named, never guessed at. */
export function parseWaitsQuery(params: URLSearchParams): { query: WaitsQuery; problems: string[] } {
  const problems: string[] = [];
  const query: WaitsQuery = { metadata: [] };
  const text = (name: string) => filterText(params, name);
  Object.assign(query, parseSignalAndRun(params, problems));
  query.metadata = parseMetadataPairs(params, problems);
  for (const [name, field, label] of [["deadline_before", "deadlineBefore", "Times out before"], ["deadline_after", "deadlineAfter", "Times out after"]] as const) {
    const v = text(name);
    if (v === undefined) continue;
    const at = parseInstant(v);
    if (at) query[field] = at;
    else problems.push(`${label}: a date and time (UTC), e.g. 2026-12-01T09:00.`);
  }
  const kind = WAIT_KINDS.find((k) => k === text("kind"));
  if (kind) query.kind = kind;
  else if (text("kind") !== undefined) problems.push(`Kind: one of ${WAIT_KINDS.join(", ")}.`);
  const cursor = text("cursor");
  if (cursor !== undefined) query.cursor = cursor;
  return { query, problems };
}

/** The same URL with another cursor: the filters stay in the link. */
function withCursor(query: WaitsQuery, cursor: string): string {
  const p = new URLSearchParams();
  if (query.signal) p.set("signal", query.signal);
  if (query.run) p.set("run", query.run);
  for (const [k, v] of query.metadata) p.append("meta", `${k}=${v}`);
  if (query.deadlineBefore) p.set("deadline_before", query.deadlineBefore.toISOString());
  if (query.deadlineAfter) p.set("deadline_after", query.deadlineAfter.toISOString());
  if (query.kind) p.set("kind", query.kind);
  p.set("cursor", cursor);
  return `${CONSOLE}/waits?${p}`;
}

export async function waitsPage(deps: Pick<Deps, "db">, params: URLSearchParams, frame: Omit<PageFrame, "title">): Promise<{ status: 200 | 400; body: Html }> {
  const { query, problems } = parseWaitsQuery(params);
  const f = { ...frame, title: "Pending waits", section: "waits" as const };
  if (problems.length > 0) {
    return { status: 400, body: page(f, html`<h1>Pending waits</h1>${problems.map((p) => notice("error", p))}${filterForm(query)}`) };
  }
  const result = await findWaits(deps, {
    status: "waiting",
    limit: PAGE_SIZE,
    ...(query.signal ? { signal: query.signal } : {}),
    ...(query.run ? { runId: query.run } : {}),
    ...(query.metadata.length > 0 ? { metadata: Object.fromEntries(query.metadata) } : {}),
    ...(query.deadlineBefore ? { deadlineBefore: query.deadlineBefore } : {}),
    ...(query.deadlineAfter ? { deadlineAfter: query.deadlineAfter } : {}),
    ...(query.kind ? { kind: query.kind } : {}),
    ...(query.cursor ? { cursor: query.cursor } : {}),
  });
  const now = Date.now();
  const body = html`<h1>Pending waits</h1>
${filterForm(query)}
${result.items.length === 0
    ? html`<p>No open wait matches.</p>`
    : scrollTable(
        "Pending waits",
        html`<table>
<caption>Open waits, oldest first${query.cursor ? " (continued)" : ""}</caption>
<thead><tr><th scope="col">Run</th><th scope="col">Signal</th><th scope="col">Kind</th><th scope="col">Waiting for</th><th scope="col">Fires or times out</th><th scope="col">Metadata</th></tr></thead>
<tbody>${result.items.map((w) => waitRow(w, now))}</tbody>
</table>`,
      )}
${result.next_cursor ? html`<p><a href="${withCursor(query, result.next_cursor)}" rel="next">Next ${PAGE_SIZE} (older first)</a></p>` : ""}`;
  return { status: 200, body: page(f, body) };
}

/**
 * When the wait ends by itself: its deadline, or for a timer the instant it fires (a timer has
 * no deadline: it is received then). "never" only for a wait that waits until cancelled.
 */
export function dueCell(w: Pick<WaitResource, "timeout_at" | "fires_at" | "kind">, now: number): Html | string {
  const at = (iso: string, verb: string) => {
    const ms = new Date(iso).getTime() - now;
    return html`${verb} ${ms >= 0 ? `in ${duration(ms)}` : `${duration(-ms)} ago`}<div class="sub">${when(iso)}</div>`;
  };
  const fires = w.kind === "timer" && w.fires_at ? at(w.fires_at, "fires") : "";
  const timeout = w.timeout_at ? at(w.timeout_at, "times out") : "";
  if (fires && timeout) return html`${fires}<div>${timeout}</div>`;
  return fires || timeout || "never";
}

function waitRow(w: WaitResource, now: number): Html {
  return html`<tr>
<td>${runLink(w.run_id)}${w.key ? html`<div class="sub">${w.key}</div>` : ""}</td>
<td>${w.signal}</td>
<td>${w.kind}</td>
<td>${duration(now - new Date(w.created_at).getTime())}<div class="sub">since ${when(w.created_at)}</div></td>
<td>${dueCell(w, now)}</td>
<td>${metadataList(w.metadata)}</td>
</tr>`;
}

function filterForm(q: WaitsQuery): Html {
  const metas = [...q.metadata.map(([k, v]) => `${k}=${v}`), ""];
  return html`<form class="filters" method="get" action="${CONSOLE}/waits" role="search" aria-label="Filter pending waits">
<div class="field"><label for="f-signal">Signal</label><input id="f-signal" name="signal" value="${q.signal ?? ""}" maxlength="100"></div>
<div class="field"><label for="f-run">Run</label><input id="f-run" name="run" value="${q.run ?? ""}" maxlength="200"></div>
${metas.map((m, i) => html`<div class="field"><label for="f-meta-${i}">Metadata key=value</label><input id="f-meta-${i}" name="meta" value="${m}" placeholder="assignee=kim" maxlength="1200"></div>`)}
<div class="field"><label for="f-before">Times out before (UTC)</label><input id="f-before" name="deadline_before" type="datetime-local" value="${toInputInstant(q.deadlineBefore)}"></div>
<div class="field"><label for="f-after">Times out after (UTC)</label><input id="f-after" name="deadline_after" type="datetime-local" value="${toInputInstant(q.deadlineAfter)}"></div>
<div class="field"><label for="f-kind">Kind</label><select id="f-kind" name="kind"><option value="">any kind</option>${WAIT_KINDS.map((k) => html`<option${k === q.kind ? html` selected` : ""}>${k}</option>`)}</select></div>
<div class="actions"><button type="submit">Filter</button> <a href="${CONSOLE}/waits">Clear</a></div>
</form>`;
}
