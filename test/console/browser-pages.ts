import path from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { expect } from "vitest";
import { API_KEY } from "../helpers/test-app.ts";

const AXE = path.resolve("node_modules/axe-core/axe.min.js");

/** A page that records every request it makes and every console error (a CSP violation is one). */
export async function openPage(context: BrowserContext) {
  const page = await context.newPage();
  const requests: string[] = [];
  const problems: string[] = [];
  page.on("request", (r) => requests.push(r.url()));
  page.on("console", (m) => {
    if (m.type() === "error" || m.type() === "warning") problems.push(m.text());
  });
  page.on("pageerror", (e) => problems.push(e.message));
  return { page, requests, problems };
}

/** Signs in through the form, as an operator would, arriving at `next`. */
export async function signInPage(page: Page, baseUrl: string, next = "/console/waits") {
  await page.goto(baseUrl + next);
  expect(new URL(page.url()).pathname).toBe("/console/sign-in");
  await page.getByLabel("Management key or JWT").fill(API_KEY);
  await page.getByLabel("Your name").fill("Kim Operator");
  await Promise.all([page.waitForURL((u) => u.pathname === new URL(baseUrl + next).pathname), page.getByRole("button", { name: "Sign in" }).click()]);
}

/** axe-core's serious and critical findings on the page (the context must bypass the CSP to inject it). */
export async function axeViolations(page: Page): Promise<unknown[]> {
  await page.addScriptTag({ path: AXE });
  type Violation = { id: string; impact: string; nodes: Array<{ target: unknown }> };
  const violations = await page.evaluate(async () => (await (globalThis as unknown as { axe: { run(): Promise<{ violations: Violation[] }> } }).axe.run()).violations);
  return violations.filter((v) => v.impact === "serious" || v.impact === "critical").map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.map((n) => n.target) }));
}

/** The page's width past a narrow screen's, or 0 when it fits. */
export async function overflowPx(page: Page, width: number): Promise<number> {
  const scroll = await page.evaluate(() => (globalThis as unknown as { document: { documentElement: { scrollWidth: number } } }).document.documentElement.scrollWidth);
  return scroll > width ? scroll : 0;
}

export const shotName = (p: string) => p.replace(/^\/console\//, "").replace(/[^a-z0-9]+/gi, "-").replace(/-+$/, "");
