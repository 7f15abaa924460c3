import { html } from "hono/html";
import { CONSOLE, page, type Html, type PageFrame } from "../layout.ts";

/** A failure, said for a person: what went wrong, and a way back. */
export function errorPage(frame: Omit<PageFrame, "title">, title: string, detail: string): Html {
  return page({ ...frame, title }, html`<h1>${title}</h1><p>${detail}</p><p><a href="${CONSOLE}/waits">Back to the console</a></p>`);
}
