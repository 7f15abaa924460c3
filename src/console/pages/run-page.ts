import { html } from "hono/html";
import type { Deps } from "../../deps.ts";
import { getRun, getRunEvents } from "../../runs/get-run.ts";
import type { EventResource } from "../../runs/stream-events.ts";
import { findWaits } from "../../waits/find-waits.ts";
import type { WaitResource } from "../../waits/wait-view.ts";
import { CONSOLE, csrfField, notice, page, prettyJson, runLink, scrollTable, when, type Html, type PageFrame } from "../layout.ts";

const WAITS_SHOWN = 100;
const EVENTS_SHOWN = 200;

/** What a control form did, said after the redirect that follows it. */
const DONE: Record<string, string> = { paused: "The run is paused.", resumed: "The run was resumed.", cancelled: "The run is cancelled." };

export const runPath = (runId: string) => `${CONSOLE}/runs/${encodeURIComponent(runId)}`;

export async function runPage(deps: Pick<Deps, "db">, runId: string, params: URLSearchParams, frame: Omit<PageFrame, "title"> & { csrf: string }): Promise<Html> {
  const run = await getRun(deps, runId);
  const after = params.get("after") ?? undefined;
  const [waits, events] = await Promise.all([findWaits(deps, { runId, limit: WAITS_SHOWN }), getRunEvents(deps, runId, after, EVENTS_SHOWN)]);
  const done = DONE[params.get("done") ?? ""];
  const c = run.control;
  const state = run.status === "continued" ? "continued" : c.is_cancelled ? "cancelled" : c.is_paused ? "paused" : "active";
  const lastEvent = events.items[events.items.length - 1]?.id ?? after ?? "";
  const body = html`<h1>Run <span class="mono">${run.run_id}</span></h1>
${done ? notice("ok", done) : ""}
<section aria-labelledby="control-h">
<h2 id="control-h">Control</h2>
<dl class="facts">
<dt>State</dt><dd><strong class="state state-${state}">${state}</strong></dd>
${c.is_paused ? html`<dt>Paused</dt><dd>${when(c.paused_at)} by ${c.paused_by ?? "—"}${c.pause_reason ? html`: ${c.pause_reason}` : ""}</dd>` : ""}
${c.is_cancelled ? html`<dt>Cancelled by</dt><dd>${c.cancelled_by ?? "—"}${c.cancel_reason ? html`: ${c.cancel_reason}` : ""}</dd>` : ""}
${run.continued_as ? html`<dt>Continued as</dt><dd>${runLink(run.continued_as)} ${when(run.continued_at)}</dd>` : ""}
${run.newest_run_id !== run.run_id && run.newest_run_id !== run.continued_as ? html`<dt>Newest run</dt><dd>${runLink(run.newest_run_id)} <span class="sub">(signals and waits for this run go there)</span></dd>` : ""}
${run.continued_from ? html`<dt>Continued from</dt><dd>${runLink(run.continued_from)}</dd>` : ""}
<dt>Open waits</dt><dd>${run.open_waits}</dd>
<dt>Parent</dt><dd>${run.parent_run_id ? runLink(run.parent_run_id) : "—"}</dd>
<dt>Children</dt><dd>${run.children.length === 0 ? "—" : html`<ul class="inline">${run.children.map((child) => html`<li>${runLink(child)}</li>`)}</ul>`}</dd>
</dl>
${run.status === "active" ? controls(run.run_id, c.is_paused, frame.csrf) : ""}
</section>
<section aria-labelledby="waits-h">
<h2 id="waits-h">Waits</h2>
${waits.items.length === 0 ? html`<p>No waits.</p>` : scrollTable("Waits of this run", waitsTable(waits.items))}
${waits.next_cursor ? html`<p>Showing the first ${WAITS_SHOWN}; <a href="${CONSOLE}/waits?run=${encodeURIComponent(run.run_id)}">all open waits of this run</a>.</p>` : ""}
</section>
<p><a href="${CONSOLE}/signals?run=${encodeURIComponent(run.run_id)}">Signals sent to this run</a> (accepted and rejected)</p>
<section aria-labelledby="history-h">
<h2 id="history-h">History</h2>
<ol class="timeline" id="timeline"${events.next_cursor ? "" : html` data-stream="${runPath(run.run_id)}/events?after=${lastEvent}"`}>
${events.items.map(eventItem)}
</ol>
${events.items.length === 0 ? html`<p id="timeline-empty">No events yet.</p>` : ""}
${events.next_cursor ? html`<p><a href="${runPath(run.run_id)}?after=${events.next_cursor}" rel="next">Later events</a></p>` : html`<p class="sub" id="live-status" role="status">New events appear here as they happen.</p>`}
</section>`;
  return page({ ...frame, title: `Run ${run.run_id}` }, body);
}

function controls(runId: string, paused: boolean, csrf: string): Html {
  const action = (verb: string) => `${runPath(runId)}/${verb}`;
  return html`<div class="controls">
${paused
    ? html`<form method="post" action="${action("resume")}">${csrfField(csrf)}<button type="submit">Resume</button></form>`
    : html`<form method="post" action="${action("pause")}">${csrfField(csrf)}<label for="pause-reason">Reason</label><input id="pause-reason" name="reason" maxlength="1000"><button type="submit">Pause</button></form>`}
<form method="post" action="${action("cancel")}">${csrfField(csrf)}<label for="cancel-reason">Reason</label><input id="cancel-reason" name="reason" maxlength="1000"><button type="submit" class="danger">Cancel run</button></form>
</div>`;
}

function waitsTable(waits: WaitResource[]): Html {
  return html`<table>
<thead><tr><th scope="col">Signal</th><th scope="col">Status</th><th scope="col">Kind</th><th scope="col">Opened</th><th scope="col">Fires or times out</th><th scope="col">Resolved</th><th scope="col">Callback</th><th scope="col">Result</th></tr></thead>
<tbody>${waits.map(
    (w) => html`<tr>
<td>${w.signal}${w.key ? html`<div class="sub">${w.key}</div>` : ""}</td>
<td><span class="status status-${w.status}">${w.status}</span></td>
<td>${w.kind}</td>
<td>${when(w.created_at)}</td>
<td>${w.kind === "timer" && w.fires_at ? html`fires ${when(w.fires_at)}${w.timeout_at ? html`<div class="sub">times out ${when(w.timeout_at)}</div>` : ""}` : when(w.timeout_at)}</td>
<td>${when(w.resolved_at)}</td>
<td>${w.delivery.status}${w.delivery.attempts > 0 ? html` (${w.delivery.attempts} attempts)` : ""}${w.delivery.last_error ? html`<div class="sub">${w.delivery.last_error}</div>` : ""}${replyOf(w)}</td>
<td>${w.result ? html`<details><summary>payload</summary>${prettyJson(w.result.payload)}</details>` : "—"}</td>
</tr>`,
  )}</tbody>
</table>`;
}

/** The callback's reply, once delivered: the engine's JSON answer, or a word that there was none. */
function replyOf(w: WaitResource): Html | string {
  if (w.replied_at === null) return "";
  if (w.reply === null) return html`<div class="sub">replied without JSON</div>`;
  return html`<details class="reply"><summary>reply</summary>${prettyJson(w.reply)}</details>`;
}

/** One history entry; console.js renders live ones the same way (keep the two in step). */
function eventItem(e: EventResource): Html {
  return html`<li id="${e.id}"><span class="etype">${e.type}</span> ${when(e.occurred_at)}${e.wait_id ? html` <span class="sub">${e.wait_id}</span>` : ""}
${Object.keys(e.data).length > 0 ? html`<details><summary>data</summary>${prettyJson(e.data)}</details>` : ""}</li>`;
}
