import { html } from "hono/html";
import type { Deps } from "../../deps.ts";
import { listSignalTypesPage } from "../../signal-types/list-signal-types.ts";
import type { SignalTypeResource } from "../../signal-types/signal-type.ts";
import { findWaits } from "../../waits/find-waits.ts";
import type { WaitResource } from "../../waits/wait-view.ts";
import { MAX_COMMENT_CHARS } from "../../approvals/respond-to-link.ts";
import { CONSOLE, csrfField, duration, metadataList, notice, page, runLink, when, type Html, type PageFrame } from "../layout.ts";
import { SIGNAL_NAME } from "../../core/names.ts";
import { parseMetadataPairs } from "../query-values.ts";

const PAGE_SIZE = 50;
/** Approval types looked at for the unfiltered inbox; past it the operator picks one. */
const TYPES_MERGED = 50;

/**
 * Only a wait for a signal from outside takes an answer: a timer, sensor or composite wait may
 * share an approval type's name, but raises its own signal.
 */
const ANSWERABLE = "external";

/** What the redirect after an answer says. */
export const ANSWERED: Record<string, string> = {
  received: "Your answer was recorded: the wait is received.",
  vote: "Your vote was counted; the wait needs more votes before it is decided.",
  duplicate: "You had already given this answer.",
  rejected_idempotency_conflict: "You had already answered this wait differently; your first answer stands.",
  rejected_not_waiting: "The wait is no longer waiting: nothing was recorded.",
  rejected_not_active: "The run is cancelled: nothing was recorded.",
};

export async function approvalsPage(deps: Pick<Deps, "db">, params: URLSearchParams, frame: Omit<PageFrame, "title"> & { csrf: string }): Promise<Html> {
  const types = (await listSignalTypesPage(deps, { limit: 500 })).items.filter((t) => (t.responses ?? []).length > 0);
  const byName = new Map(types.map((t) => [t.name, t]));
  const chosen = params.get("signal") ?? "";
  const cursor = params.get("cursor") ?? undefined;
  const problems: string[] = [];
  const metaPairs = parseMetadataPairs(params, problems);
  const metadata = metaPairs.length > 0 ? { metadata: Object.fromEntries(metaPairs) } : {};
  let waits: WaitResource[] = [];
  let next: string | null = null;
  if (problems.length > 0) {
    // Nothing is listed under a filter that cannot be read; the form says what to fix.
  } else if (chosen !== "" && SIGNAL_NAME.test(chosen) && byName.has(chosen)) {
    const found = await findWaits(deps, { signal: chosen, status: "waiting", kind: ANSWERABLE, limit: PAGE_SIZE, ...metadata, ...(cursor ? { cursor } : {}) });
    waits = found.items;
    next = found.next_cursor;
  } else {
    // The oldest open approvals of every approval type, merged: each type's index gives its oldest.
    const lists = await Promise.all(types.slice(0, TYPES_MERGED).map((t) => findWaits(deps, { signal: t.name, status: "waiting", kind: ANSWERABLE, limit: PAGE_SIZE, ...metadata })));
    waits = lists
      .flatMap((l) => l.items)
      .sort((a, b) => a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id))
      .slice(0, PAGE_SIZE);
  }
  const outcome = params.get("answered") ?? "";
  const answered = ANSWERED[outcome] ?? (/^[a-z_]{1,40}$/.test(outcome) ? `The answer was not accepted (${outcome}).` : undefined);
  const now = Date.now();
  const body = html`<h1>Approvals</h1>
${problems.map((p) => notice("error", p))}
${answered ? notice(outcome in ANSWERED && !outcome.startsWith("rejected") ? "ok" : "error", answered) : ""}
${types.length === 0
    ? html`<p>No signal type declares <code>responses</code>, so nothing asks for approval.</p>`
    : html`<form class="filters" method="get" action="${CONSOLE}/approvals" role="search" aria-label="Choose an approval type">
<div class="field"><label for="a-signal">Signal type</label><select id="a-signal" name="signal"><option value="">all approval types</option>${types.map(
        (t) => html`<option${t.name === chosen ? html` selected` : ""}>${t.name}</option>`,
      )}</select></div>
${[...metaPairs.map(([k, v]) => `${k}=${v}`), ""].map((m, i) => html`<div class="field"><label for="a-meta-${i}">Metadata key=value</label><input id="a-meta-${i}" name="meta" value="${m}" placeholder="assignee=kim" maxlength="1200"></div>`)}
<div class="actions"><button type="submit">Show</button> <a href="${CONSOLE}/approvals">Clear</a></div>
</form>`}
${types.length > 0 && waits.length === 0 ? html`<p>Nothing is waiting for an answer.</p>` : ""}
${waits.map((w) => approvalCard(w, byName.get(w.signal), frame.csrf, now))}
${next ? html`<p><a href="${nextUrl(chosen, metaPairs, next)}" rel="next">Next ${PAGE_SIZE}</a></p>` : ""}
${chosen === "" && types.length > TYPES_MERGED ? html`<p>Showing the first ${TYPES_MERGED} approval types; choose one above to see the rest.</p>` : ""}`;
  return page({ ...frame, title: "Approvals", section: "approvals" }, body);
}

function approvalCard(w: WaitResource, type: SignalTypeResource | undefined, csrf: string, now: number): Html {
  const heading = `a-${w.id}`;
  const timeout = w.timeout_at ? new Date(w.timeout_at).getTime() : null;
  return html`<article class="card" aria-labelledby="${heading}">
<h2 id="${heading}">${w.signal} <span class="sub">for run</span> ${runLink(w.run_id)}</h2>
${type?.description ? html`<p>${type.description}</p>` : ""}
<dl class="facts">
<dt>Waiting for</dt><dd>${duration(now - new Date(w.created_at).getTime())} (since ${when(w.created_at)})</dd>
<dt>Times out</dt><dd>${timeout === null ? "never" : html`in ${duration(timeout - now)} (${when(w.timeout_at)})`}</dd>
<dt>Metadata</dt><dd>${metadataList(w.metadata)}</dd>
${w.quorum ? html`<dt>Votes</dt><dd>${votes(w)} <span class="sub">(${w.quorum.count} alike decide${w.quorum.veto?.length ? html`; a veto: ${w.quorum.veto.join(", ")}` : ""})</span></dd>` : ""}
</dl>
<form method="post" action="${CONSOLE}/approvals/${w.id}">
${csrfField(csrf)}
<label for="c-${w.id}">Comment (optional)</label>
<textarea id="c-${w.id}" name="comment" rows="2" maxlength="${MAX_COMMENT_CHARS}"></textarea>
<div class="responses">${(type?.responses ?? []).map((r) => html`<button type="submit" name="response" value="${r}">${r}</button>`)}</div>
</form>
</article>`;
}

function nextUrl(signal: string, meta: Array<[string, string]>, cursor: string): string {
  const p = new URLSearchParams({ signal });
  for (const [k, v] of meta) p.append("meta", `${k}=${v}`);
  p.set("cursor", cursor);
  return `${CONSOLE}/approvals?${p}`;
}

function votes(w: WaitResource): Html | string {
  const entries = Object.entries(w.votes ?? {});
  if (entries.length === 0) return "none yet";
  return html`<ul class="inline">${entries.map(([response, who]) => html`<li><strong>${response}</strong>: ${who.join(", ")}</li>`)}</ul>`;
}
