import { html } from "hono/html";
import type { Deps } from "../../deps.ts";
import { findSignals, toSignalResource } from "../../signals/list-signals.ts";
import { REDRIVABLE_OUTCOMES } from "../../signals/redrive-signal.ts";
import { RECORD_OUTCOMES, type RecordOutcome } from "../../signals/signal-outcome.ts";
import { CONSOLE, csrfField, notice, page, prettyJson, runLink, scrollTable, when, type Html, type PageFrame } from "../layout.ts";
import { filterText, parseSignalAndRun, SIGNAL_ID } from "../query-values.ts";

const PAGE_SIZE = 50;
/** The outcome filter's value for every rejection at once: the dead letters. */
export const DEAD_LETTERS = "rejected";
/** Outcomes a record can show that are not rejections (accepted, started, or buffered and never taken). */
const KEPT = new Set<RecordOutcome>(["received", "buffered", "started", "expired", "duplicate"]);

type SignalRecord = ReturnType<typeof toSignalResource>;

export interface SignalsQuery {
  outcome?: RecordOutcome | typeof DEAD_LETTERS;
  signal?: string;
  run?: string;
  cursor?: string;
}

export function parseSignalsQuery(params: URLSearchParams): { query: SignalsQuery; problems: string[] } {
  const problems: string[] = [];
  const query: SignalsQuery = {};
  const text = (name: string) => filterText(params, name);
  const outcome = text("outcome");
  if (outcome === DEAD_LETTERS) query.outcome = DEAD_LETTERS;
  else if (outcome !== undefined) {
    const found = RECORD_OUTCOMES.find((o) => o === outcome);
    if (found) query.outcome = found;
    else problems.push("Outcome: one of the outcomes listed.");
  }
  Object.assign(query, parseSignalAndRun(params, problems));
  const cursor = text("cursor");
  if (cursor !== undefined) query.cursor = cursor;
  return { query, problems };
}

export function signalsUrl(q: SignalsQuery, extra: Record<string, string> = {}): string {
  const p = new URLSearchParams();
  if (q.outcome) p.set("outcome", q.outcome);
  if (q.signal) p.set("signal", q.signal);
  if (q.run) p.set("run", q.run);
  if (q.cursor) p.set("cursor", q.cursor);
  for (const [k, v] of Object.entries(extra)) p.set(k, v);
  return `${CONSOLE}/signals?${p}`;
}

/** What the redirect after a redrive says: the new attempt's outcome and record. */
function redriveNotice(params: URLSearchParams): Html | string {
  const outcome = RECORD_OUTCOMES.find((o) => o === params.get("redriven"));
  const id = params.get("as") ?? "";
  if (!outcome || !SIGNAL_ID.test(id)) return "";
  const accepted = outcome === "received" || outcome === "buffered" || outcome === "started" || outcome === "duplicate";
  return notice(accepted ? "ok" : "error", `Sent again: ${outcome} (${id}).${accepted ? "" : " It is a new dead letter, which can be redriven in turn."}`);
}

/** The signal log, newest first: the same verb (and records) as GET /signals and GET /runs/{run}/signals. */
export async function signalsPage(deps: Pick<Deps, "db">, params: URLSearchParams, frame: Omit<PageFrame, "title"> & { csrf: string }): Promise<{ status: 200 | 400; body: Html }> {
  const { query, problems } = parseSignalsQuery(params);
  const f = { ...frame, title: "Signal log", section: "signals" as const };
  if (problems.length > 0) return { status: 400, body: page(f, html`<h1>Signal log</h1>${problems.map((p) => notice("error", p))}${filterForm(query)}`) };
  const found = await findSignals(deps, {
    limit: PAGE_SIZE,
    newestFirst: true,
    ...(query.outcome === DEAD_LETTERS ? { rejected: true } : query.outcome ? { outcome: query.outcome } : {}),
    ...(query.signal ? { signal: query.signal } : {}),
    ...(query.run ? { runId: query.run } : {}),
    ...(query.cursor ? { cursor: query.cursor } : {}),
  });
  const body = html`<h1>Signal log</h1>
<p class="sub">Every signal that passed authentication, accepted or rejected, newest first. Rejections are the dead letters: one with no open wait, expired, or with a payload its schema refused can be redriven (sent again, once).</p>
${redriveNotice(params)}
${filterForm(query)}
${found.items.length === 0
    ? html`<p>No signal matches.</p>`
    : scrollTable(
        "Signal log",
        html`<table>
<caption>Signals, newest first${query.cursor ? " (continued)" : ""}</caption>
<thead><tr><th scope="col">Received</th><th scope="col">Run</th><th scope="col">Signal</th><th scope="col">Outcome</th><th scope="col">Payload</th><th scope="col">Validation errors</th></tr></thead>
<tbody>${found.items.map((item) => signalRow(item, query, frame.csrf))}</tbody>
</table>`,
      )}
${found.next_cursor ? html`<p><a href="${signalsUrl({ ...query, cursor: found.next_cursor })}" rel="next">Older ${PAGE_SIZE}</a></p>` : ""}`;
  return { status: 200, body: page(f, body) };
}

function signalRow(s: SignalRecord, q: SignalsQuery, csrf: string): Html {
  const rejected = !KEPT.has(s.outcome);
  return html`<tr>
<td>${when(s.received_at)}<div class="sub mono"><a href="${CONSOLE}/signals/${s.id}">${s.id}</a></div></td>
<td>${runLink(s.run_id)}</td>
<td>${s.signal}${s.sequence !== null ? html`<div class="sub">#${s.sequence}</div>` : ""}</td>
<td><span class="outcome${rejected ? " outcome-rejected" : ""}">${s.outcome}</span>${s.idempotency_key ? html`<div class="sub">key ${s.idempotency_key}</div>` : ""}${redriveCell(s, q, csrf)}</td>
<td>${payloadCell(s)}</td>
<td>${s.validation_errors && s.validation_errors.length > 0
    ? html`<ul class="errors">${s.validation_errors.map((e) => html`<li><code>${e.path === "" ? "(root)" : e.path}</code> ${e.message}</li>`)}</ul>`
    : "—"}</td>
</tr>`;
}

/** Where a record stands with redrive: sent again as, sent again from, or a button to send it again. */
function redriveCell(s: SignalRecord, q: SignalsQuery, csrf: string): Html | string {
  const from = s.redriven_from ? html`<div class="sub">redriven from <span class="mono">${s.redriven_from}</span></div>` : "";
  if (s.redriven_as) return html`${from}<div class="sub">redriven as <span class="mono">${s.redriven_as}</span></div>`;
  if (!(REDRIVABLE_OUTCOMES as readonly string[]).includes(s.outcome) || s.payload === null) return from;
  // The filter goes back with the form, so the redirect returns to this view.
  return html`${from}<form method="post" action="${CONSOLE}/signals/${s.id}/redrive">
${csrfField(csrf)}${q.outcome ? html`<input type="hidden" name="outcome" value="${q.outcome}">` : ""}${q.signal ? html`<input type="hidden" name="signal" value="${q.signal}">` : ""}${q.run ? html`<input type="hidden" name="run" value="${q.run}">` : ""}
<button type="submit" aria-label="Redrive ${s.id}">Redrive</button>
</form>`;
}

function payloadCell(s: SignalRecord): Html | string {
  if (s.payload === null && s.payload_bytes !== null) return html`<span class="sub">not kept (${s.payload_bytes} bytes)</span>`;
  if (s.payload === null) return "—";
  return html`<details><summary>payload</summary>${prettyJson(s.payload)}</details>`;
}

function filterForm(q: SignalsQuery): Html {
  return html`<form class="filters" method="get" action="${CONSOLE}/signals" role="search" aria-label="Filter the signal log">
<div class="field"><label for="s-outcome">Outcome</label><select id="s-outcome" name="outcome"><option value="">any outcome</option><option value="${DEAD_LETTERS}"${q.outcome === DEAD_LETTERS ? html` selected` : ""}>dead letters (every rejection)</option>${RECORD_OUTCOMES.filter((o) => o !== "duplicate").map(
    (o) => html`<option${o === q.outcome ? html` selected` : ""}>${o}</option>`,
  )}</select></div>
<div class="field"><label for="s-signal">Signal</label><input id="s-signal" name="signal" value="${q.signal ?? ""}" maxlength="100"></div>
<div class="field"><label for="s-run">Run</label><input id="s-run" name="run" value="${q.run ?? ""}" maxlength="200"></div>
<div class="actions"><button type="submit">Filter</button> <a href="${CONSOLE}/signals">Clear</a></div>
</form>`;
}
