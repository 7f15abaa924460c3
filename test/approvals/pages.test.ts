import { describe, expect, it } from "vitest";
import { confirmPage, errorPage, escapeHtml, resultPage } from "../../src/approvals/pages.ts";
import { checkPageBasics, findAll, parseStrictHtml, textOf } from "../helpers/html-check.ts";

// The approval pages without a browser: well-formed, accessible basics, and every string a
// caller chose (response, responder, signal, run, comment) shown as text, never as markup.

const HOSTILE = `<script>alert("x")</script> & 'quotes' "double" </main><img src=x onerror=alert(1)>`;

describe("the approval pages", () => {
  it("the confirmation page: a labelled optional comment and a submit button naming the response", () => {
    const html = confirmPage({ response: "approve", responder: "kim@example.com", signal: "manager-approval", runId: "order-17", expiresAt: new Date("2030-01-02T03:04:05Z"), maxCommentChars: 2000 });
    const doc = checkPageBasics(html);
    expect(doc.attrs.lang).toBe("en");
    const [form] = findAll(doc, "form");
    expect(form?.attrs.method).toBe("post");
    expect(form?.attrs.action).toBeUndefined(); // posts back to the link's own URL
    const [textarea] = findAll(form!, "textarea");
    expect(textarea?.attrs).toMatchObject({ name: "comment", maxlength: "2000" });
    const label = findAll(form!, "label").find((l) => l.attrs.for === textarea?.attrs.id);
    expect(textOf(label!)).toBe("Comment (optional)");
    const buttons = findAll(form!, "button");
    expect(buttons).toHaveLength(1);
    expect(buttons[0]!.attrs.type).toBe("submit");
    expect(textOf(buttons[0]!)).toBe("Answer “approve”");
    expect(textOf(findAll(doc, "title")[0]!)).toMatch(/approve/);
    expect(findAll(doc, "time")[0]?.attrs.datetime).toBe("2030-01-02T03:04:05.000Z");
  });

  it("escapes every interpolated string", () => {
    const pages = [
      confirmPage({ response: HOSTILE, responder: HOSTILE, signal: HOSTILE, runId: HOSTILE, expiresAt: new Date(), maxCommentChars: 2000 }),
      resultPage({ response: HOSTILE, responder: HOSTILE, signal: HOSTILE, comment: HOSTILE, moreVotesNeeded: false }),
      errorPage(HOSTILE, HOSTILE),
    ];
    for (const html of pages) {
      const doc = checkPageBasics(html); // throws on a <script>, a stray tag or an unclosed element
      expect(findAll(doc, "img")).toEqual([]);
      expect(textOf(findAll(doc, "main")[0]!)).toContain(HOSTILE);
    }
    expect(textOf(findAll(parseStrictHtml(pages[0]!), "button")[0]!)).toBe(`Answer “${HOSTILE}”`);
    expect(escapeHtml(`&<>"'`)).toBe("&amp;&lt;&gt;&quot;&#39;");
  });

  it("the result page shows the comment and says whether more votes are needed", () => {
    const one = checkPageBasics(resultPage({ response: "approve", responder: "kim", signal: "s", comment: "line 1\nline 2", moreVotesNeeded: true }));
    expect(textOf(findAll(one, "blockquote")[0]!)).toBe("line 1 line 2");
    expect(textOf(findAll(one, "main")[0]!)).toMatch(/counts as one vote/);
    const none = checkPageBasics(resultPage({ response: "approve", responder: "kim", signal: "s", moreVotesNeeded: false }));
    expect(findAll(none, "blockquote")).toEqual([]);
  });
});

describe("the strict HTML checker itself", () => {
  const ok = (body: string) => `<!DOCTYPE html>\n<html lang="en"><head><title>t</title></head><body><main><h1>h</h1>${body}</main></body></html>`;

  it("accepts a good page", () => {
    expect(() => checkPageBasics(ok(`<form method="post"><label for="c">C</label><textarea id="c"></textarea><button type="submit">Go</button></form>`))).not.toThrow();
  });

  it.each([
    ["no doctype", `<html lang="en"><head><title>t</title></head><body><main><h1>h</h1></main></body></html>`, /DOCTYPE/],
    ["an unclosed element", ok("<p>open"), /closes|unclosed/],
    ["a misnested element", ok("<p><strong>x</p></strong>"), /closes/],
    ["a script", ok("<script>x</script>"), /script/],
    ["a raw '<'", ok("<p>a < b</p>"), /malformed tag/],
    ["a raw '>'", ok("<p>a > b</p>"), /stray '>'/],
    ["a bare '&'", ok("<p>a & b</p>"), /entity/],
    ["an unquoted attribute", ok(`<p class=x>y</p>`), /malformed tag/],
    ["a textarea without a label", ok(`<textarea id="c"></textarea>`), /label/],
    ["a label for another id", ok(`<label for="d">C</label><textarea id="c"></textarea>`), /label/],
    ["duplicate ids", ok(`<p id="a">1</p><p id="a">2</p>`), /duplicate ids/],
    ["no lang", `<!DOCTYPE html><html><head><title>t</title></head><body><main><h1>h</h1></main></body></html>`, /lang/],
    ["no title", `<!DOCTYPE html><html lang="en"><head></head><body><main><h1>h</h1></main></body></html>`, /title/],
    ["no main", `<!DOCTYPE html><html lang="en"><head><title>t</title></head><body><h1>h</h1></body></html>`, /main/],
  ])("refuses %s", (_what, html, message) => {
    expect(() => checkPageBasics(html)).toThrow(message);
  });
});
