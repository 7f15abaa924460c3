import { html } from "hono/html";
import { CHART_SERIES, type ChartSeries, type TimeChart } from "../../operations/get-overview.ts";
import type { Html } from "../layout.ts";

export const SERIES_LABEL: Record<ChartSeries, string> = { received: "received", timed_out: "timed out", cancelled: "cancelled", dead_letter: "dead letters" };

const W = 600;
const H = 140;
const PLOT_TOP = 8;
const PLOT_H = 104;

const clock = (d: Date) => d.toISOString().slice(11, 16);

/**
 * A stacked bar chart drawn here, as SVG markup in the page: no script, no inline style (the
 * colours are classes of the console's stylesheet), so the console's CSP needs nothing new.
 * A <title> per bar for pointer users; the same numbers as a table for everyone else.
 */
export function timeChart(id: string, caption: string, chart: TimeChart): Html {
  const from = new Date(chart.from).getTime();
  const totals = chart.buckets.map((b) => CHART_SERIES.reduce((sum, s) => sum + b[s], 0));
  const max = Math.max(1, ...totals);
  const slot = W / chart.buckets.length;
  const barW = Math.max(1, slot - 2);
  const label = (i: number) => `${clock(new Date(from + i * chart.bucketS * 1000))}–${clock(new Date(from + (i + 1) * chart.bucketS * 1000))} UTC`;
  const sums = CHART_SERIES.map((s) => `${chart.buckets.reduce((sum, b) => sum + b[s], 0)} ${SERIES_LABEL[s]}`).join(", ");
  const bars = chart.buckets.map((b, i) => {
    let y = PLOT_TOP + PLOT_H;
    const parts = CHART_SERIES.filter((s) => b[s] > 0).map((s) => {
      const h = (b[s] / max) * PLOT_H;
      y -= h;
      return html`<rect class="s-${s}" x="${(i * slot + 1).toFixed(1)}" y="${y.toFixed(1)}" width="${barW.toFixed(1)}" height="${Math.max(0.5, h).toFixed(1)}"></rect>`;
    });
    return html`<g><title>${label(i)}: ${CHART_SERIES.map((s) => `${b[s]} ${SERIES_LABEL[s]}`).join(", ")}</title>${parts}</g>`;
  });
  return html`<figure class="chart" aria-labelledby="${id}-cap">
<figcaption id="${id}-cap">${caption}</figcaption>
<svg viewBox="0 0 ${W} ${H}" role="img" aria-label="${caption}: ${sums}" preserveAspectRatio="none" focusable="false">
<line class="axis" x1="0" y1="${PLOT_TOP + PLOT_H}" x2="${W}" y2="${PLOT_TOP + PLOT_H}"></line>
${bars}
<text class="tick" x="0" y="${H - 6}">${clock(new Date(from))}</text>
<text class="tick" x="${W}" y="${H - 6}" text-anchor="end">${clock(new Date(from + chart.buckets.length * chart.bucketS * 1000))} UTC</text>
<text class="tick" x="2" y="${PLOT_TOP + 4}">max ${max}</text>
</svg>
<details><summary>As a table</summary>
<div class="table-wrap" role="region" aria-label="${caption} as a table" tabindex="0"><table>
<thead><tr><th scope="col">Time (UTC)</th>${CHART_SERIES.map((s) => html`<th scope="col">${SERIES_LABEL[s]}</th>`)}</tr></thead>
<tbody>${chart.buckets.map((b, i) => html`<tr><td>${label(i)}</td>${CHART_SERIES.map((s) => html`<td>${b[s]}</td>`)}</tr>`)}</tbody>
</table></div>
</details>
</figure>`;
}

/** The colour key shared by the charts. */
export const chartLegend = () =>
  html`<ul class="legend" aria-label="Chart colours">${CHART_SERIES.map((s) => html`<li><svg viewBox="0 0 10 10" aria-hidden="true" focusable="false"><rect class="s-${s}" width="10" height="10"></rect></svg> ${SERIES_LABEL[s]}</li>`)}</ul>`;
