import { html } from "hono/html";
import type { Deps } from "../../deps.ts";
import type { ChangeFeed } from "../../events/change-feed.ts";
import { getSignal } from "../../signals/signal-reply.ts";
import { CONSOLE, page, prettyJson, runLink, when, type Html, type PageFrame } from "../layout.ts";

/** One signal record and its reply: the same verb as GET /signals/{id}. */
export async function signalPage(deps: Pick<Deps, "db"> & { changes: ChangeFeed }, id: string, frame: Omit<PageFrame, "title">): Promise<Html> {
  const s = await getSignal(deps, id, 0, new AbortController().signal);
  const body = html`<h1>Signal <span class="mono">${s.id}</span></h1>
<p><a href="${CONSOLE}/signals">Signal log</a></p>
<dl class="fields">
<dt>Run</dt><dd>${runLink(s.run_id)}</dd>
<dt>Signal</dt><dd>${s.signal}${s.sequence !== null ? html` <span class="sub">#${s.sequence}</span>` : ""}</dd>
<dt>Outcome</dt><dd>${s.outcome}</dd>
<dt>Received</dt><dd>${when(s.received_at)}</dd>
<dt>Idempotency key</dt><dd>${s.idempotency_key ?? "—"}</dd>
<dt>Wait</dt><dd>${s.wait_id ? html`<span class="mono">${s.wait_id}</span>` : "—"}</dd>
<dt>Callback</dt><dd>${s.delivery_status ?? "— (no wait has taken it)"}</dd>
<dt>Reply</dt><dd id="signal-reply">${replyCell(s)}</dd>
</dl>
<h2>Payload</h2>
${s.payload === null ? html`<p class="sub">${s.payload_bytes !== null ? `not kept (${s.payload_bytes} bytes)` : "none"}</p>` : prettyJson(s.payload)}`;
  return page({ ...frame, title: `Signal ${s.id}`, section: "signals" }, body);
}

function replyCell(s: { reply: unknown; reply_pending: boolean; delivery_status: string | null }): Html | string {
  if (s.reply_pending) return "pending: the callback has not been delivered yet";
  if (s.delivery_status === "delivered" || s.reply !== null) return s.reply === null ? "none (the callback answered without a JSON body)" : prettyJson(s.reply);
  return s.delivery_status === "failed" ? "none (the callback's delivery failed)" : "none will come";
}
