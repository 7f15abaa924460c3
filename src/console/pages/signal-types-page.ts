import { html } from "hono/html";
import type { Deps } from "../../deps.ts";
import { NotFoundError } from "../../core/errors.ts";
import { listSignalTypesPage } from "../../signal-types/list-signal-types.ts";
import { loadSignalType } from "../../signal-types/signal-type-cache.ts";
import { toSignalTypeResource, type SignalTypeResource } from "../../signal-types/signal-type.ts";
import { curlExample } from "../curl-example.ts";
import { CONSOLE, page, prettyJson, scrollTable, when, type Html, type PageFrame } from "../layout.ts";

const PAGE_SIZE = 100;
const typePath = (name: string) => `${CONSOLE}/signal-types/${encodeURIComponent(name)}`;

export async function signalTypesPage(deps: Pick<Deps, "db">, params: URLSearchParams, frame: Omit<PageFrame, "title">): Promise<Html> {
  const cursor = params.get("cursor") ?? undefined;
  const list = await listSignalTypesPage(deps, { limit: PAGE_SIZE, ...(cursor ? { cursor } : {}) });
  const body = html`<h1>Signal types</h1>
${list.items.length === 0
    ? html`<p>No signal type is declared yet (<code>PUT /signal-types/{name}</code>).</p>`
    : scrollTable(
        "Signal types",
        html`<table>
<thead><tr><th scope="col">Name</th><th scope="col">Description</th><th scope="col">Sender auth</th><th scope="col">Buffering</th><th scope="col">Responses</th></tr></thead>
<tbody>${list.items.map(
          (t) => html`<tr><td><a href="${typePath(t.name)}">${t.name}</a></td><td>${t.description ?? "—"}</td><td>${t.auth.scheme}</td><td>${buffering(t)}</td><td>${t.responses?.join(", ") ?? "—"}</td></tr>`,
        )}</tbody>
</table>`,
      )}
${list.next_cursor ? html`<p><a href="${CONSOLE}/signal-types?cursor=${list.next_cursor}" rel="next">Next ${PAGE_SIZE}</a></p>` : ""}`;
  return page({ ...frame, title: "Signal types", section: "signal-types" }, body);
}

export async function signalTypePage(deps: Pick<Deps, "db" | "signalTypeCache">, name: string, baseUrl: string, frame: Omit<PageFrame, "title">): Promise<Html> {
  const row = await loadSignalType(deps, name);
  if (!row) throw new NotFoundError(`no signal type named '${name}'`);
  const t = toSignalTypeResource(row);
  const body = html`<h1>Signal type <span class="mono">${t.name}</span></h1>
${t.description ? html`<p>${t.description}</p>` : ""}
<dl class="facts">
<dt>Sender auth</dt><dd>${t.auth.scheme}${t.auth.header ? html` (header <code>${t.auth.header}</code>)` : ""}; ${t.auth.secret_count} active secret${t.auth.secret_count === 1 ? "" : "s"}${t.auth.scheme === "none" ? "" : html`; timestamps within ${t.auth.tolerance_s} s`}</dd>
${t.auth.run_pointer ? html`<dt>Run pointer</dt><dd><code>${t.auth.run_pointer}</code></dd>` : ""}
<dt>Buffering</dt><dd>${buffering(t)}</dd>
<dt>Responses</dt><dd>${t.responses?.join(", ") ?? "—"}</dd>
<dt>Starts runs</dt><dd>${t.start ? html`<span class="mono">${t.start.url}</span>: a signal for a run never seen is <strong>started</strong> (kept for the run's first wait) and a signed <code>run.start</code> event is sent there` : "no"}</dd>
<dt>Notifications</dt><dd>${t.notify_url ?? "—"}${t.reminders_s.length > 0 ? html`; reminders ${t.reminders_s.join(", ")} s before the deadline` : ""}</dd>
<dt>Updated</dt><dd>${when(t.updated_at)}</dd>
</dl>
<h2>Payload schema</h2>
${t.schema === null ? html`<p>Any JSON.</p>` : prettyJson(t.schema)}
<h2 id="send-h">Send one</h2>
<p>Replace <code>RUN_ID</code> with the run, and set <code>SECRET</code> to one of the type's secrets (the console never shows them).</p>
<pre class="copy" data-copy aria-labelledby="send-h">${curlExample(t, baseUrl)}</pre>
<p><a href="${CONSOLE}/waits?signal=${encodeURIComponent(t.name)}">Open waits for ${t.name}</a></p>`;
  return page({ ...frame, title: `Signal type ${t.name}`, section: "signal-types" }, body);
}

const buffering = (t: SignalTypeResource) => (t.buffer_ttl_s > 0 ? `kept ${t.buffer_ttl_s} s` : "none");
