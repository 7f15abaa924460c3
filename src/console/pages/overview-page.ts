import { html } from "hono/html";
import type { Deps } from "../../deps.ts";
import { getOverview } from "../../operations/get-overview.ts";
import { CONSOLE, page, scrollTable, when, type Html, type PageFrame } from "../layout.ts";
import { chartLegend, timeChart } from "./time-chart.ts";

const tile = (label: string, n: number, href?: string) =>
  html`<div class="tile"><dt>${label}</dt><dd>${href ? html`<a href="${href}">${n.toLocaleString("en")}</a>` : n.toLocaleString("en")}</dd></div>`;

export async function overviewPage(deps: Pick<Deps, "db">, frame: Omit<PageFrame, "title">): Promise<Html> {
  const now = new Date();
  const o = await getOverview(deps, now);
  const inAnHour = new Date(now.getTime() + 3600_000).toISOString().slice(0, 19);
  const body = html`<h1>Overview</h1>
<p class="sub">As of ${when(o.at)}.</p>
<dl class="tiles">
${tile("Open waits", o.openWaits.total, `${CONSOLE}/waits`)}
${tile("Due within the hour", o.dueWithinHour, `${CONSOLE}/waits?deadline_before=${inAnHour}`)}
${tile("Received, last 24 h", o.last24h.received)}
${tile("Timed out, last 24 h", o.last24h.timed_out)}
${tile("Cancelled, last 24 h", o.last24h.cancelled)}
${tile("Failed deliveries", o.deliveries.failed, `${CONSOLE}/deliveries?status=failed`)}
${tile("Pending deliveries (retrying)", o.deliveries.pending, `${CONSOLE}/deliveries?status=pending`)}
${tile("Dead letters, last 24 h", o.last24h.dead_letter, `${CONSOLE}/signals?outcome=rejected`)}
</dl>
<section aria-labelledby="charts-h">
<h2 id="charts-h">Waits resolved and signals rejected</h2>
${chartLegend()}
<div class="charts">
${timeChart("hour", "Last hour, per 5 minutes", o.lastHour)}
${timeChart("day", "Last 24 hours, per hour", o.lastDay)}
</div>
</section>
<section aria-labelledby="by-signal-h">
<h2 id="by-signal-h">Open waits by signal</h2>
${o.openWaits.bySignal.length === 0
    ? html`<p>No wait is open.</p>`
    : scrollTable(
        "Open waits by signal",
        html`<table>
<thead><tr><th scope="col">Signal</th><th scope="col">Open waits</th></tr></thead>
<tbody>${o.openWaits.bySignal.map((r) => html`<tr><td><a href="${CONSOLE}/waits?signal=${encodeURIComponent(r.signal)}">${r.signal}</a></td><td>${r.n.toLocaleString("en")}</td></tr>`)}
${o.openWaits.others.names > 0 ? html`<tr><td>${o.openWaits.others.names} other signals</td><td>${o.openWaits.others.n.toLocaleString("en")}</td></tr>` : ""}</tbody>
</table>`,
      )}
</section>`;
  return page({ ...frame, title: "Overview", section: "overview" }, body);
}
