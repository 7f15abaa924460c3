/**
 * A small, strict reader for the pages signalbox writes (not a general HTML parser): it accepts
 * only what those pages should be, so anything sloppy or injected fails. Rules:
 * - starts with `<!DOCTYPE html>`; every non-void element is closed, in order; one root `html`;
 * - attributes are lower-case names with double-quoted values free of `<`, `>` and `"`;
 * - text holds no `<` or `>` and only the entities &amp; &lt; &gt; &quot; &#39;;
 * - `<style>` holds raw CSS (no `<`), and there is no `<script>` at all.
 */
export interface Element {
  name: string;
  attrs: Record<string, string>;
  children: Array<Element | string>;
}

const VOID = new Set(["meta", "link", "br", "hr", "img", "input"]);
const TAG = /<(\/?)([a-z][a-z0-9]*)((?:\s+[a-z][a-z-]*(?:="[^"<>]*")?)*)\s*>/y;
const ATTR = /\s+([a-z][a-z-]*)(?:="([^"<>]*)")?/g;
const ENTITY = /&(?!(?:amp|lt|gt|quot|#39);)/;

export function parseStrictHtml(html: string): Element {
  if (!/^<!DOCTYPE html>\n?/i.test(html)) throw new Error("no <!DOCTYPE html> at the start");
  let i = html.indexOf(">") + 1;
  const root: Element = { name: "#document", attrs: {}, children: [] };
  const stack: Element[] = [root];
  const top = () => stack[stack.length - 1]!;
  while (i < html.length) {
    const lt = html.indexOf("<", i);
    const text = html.slice(i, lt < 0 ? html.length : lt);
    if (text.includes(">")) throw new Error(`a stray '>' in text near: ${JSON.stringify(text.slice(0, 60))}`);
    if (ENTITY.test(text)) throw new Error(`an unknown entity or bare '&' in text near: ${JSON.stringify(text.slice(0, 60))}`);
    if (text.trim()) top().children.push(text);
    if (lt < 0) break;
    TAG.lastIndex = lt;
    const m = TAG.exec(html);
    if (!m) throw new Error(`malformed tag near: ${JSON.stringify(html.slice(lt, lt + 60))}`);
    const [whole, closing, name, rawAttrs] = m as unknown as [string, string, string, string];
    i = lt + whole.length;
    if (name === "script") throw new Error("a <script> element");
    if (closing) {
      if (rawAttrs.trim()) throw new Error(`attributes on </${name}>`);
      if (top().name !== name) throw new Error(`</${name}> closes <${top().name}>`);
      stack.pop();
      continue;
    }
    const attrs: Record<string, string> = {};
    for (const a of rawAttrs.matchAll(ATTR)) {
      if (a[1]! in attrs) throw new Error(`attribute ${a[1]} twice on <${name}>`);
      if (a[2] !== undefined && ENTITY.test(a[2])) throw new Error(`a bare '&' in attribute ${a[1]} of <${name}>`);
      attrs[a[1]!] = a[2] ?? "";
    }
    const el: Element = { name, attrs, children: [] };
    top().children.push(el);
    if (VOID.has(name)) continue;
    if (name === "style") {
      const end = html.indexOf("</style>", i);
      if (end < 0) throw new Error("<style> is not closed");
      const css = html.slice(i, end);
      if (css.includes("<")) throw new Error("'<' inside <style>");
      el.children.push(css);
      i = end + "</style>".length;
      continue;
    }
    stack.push(el);
  }
  if (stack.length !== 1) throw new Error(`unclosed: ${stack.slice(1).map((e) => `<${e.name}>`).join(" ")}`);
  const elements = root.children.filter((c): c is Element => typeof c !== "string");
  if (elements.length !== 1 || elements[0]!.name !== "html") throw new Error("the document must have exactly one root <html>");
  return elements[0]!;
}

export function findAll(el: Element, name: string): Element[] {
  const out: Element[] = [];
  for (const c of el.children) {
    if (typeof c === "string") continue;
    if (c.name === name) out.push(c);
    out.push(...findAll(c, name));
  }
  return out;
}

/** The text inside an element, entities decoded, whitespace collapsed. */
export function textOf(el: Element): string {
  const raw = el.children.map((c) => (typeof c === "string" ? c : textOf(c))).join(" ");
  return raw
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, "&")
    .replace(/\s+/g, " ")
    .trim();
}

/**
 * The accessibility basics every page must have: `lang`, a non-empty `<title>`, one `<main>`
 * with an `<h1>`, unique ids, and a `<label for>` naming every form control.
 */
export function checkPageBasics(html: string): Element {
  const doc = parseStrictHtml(html);
  if (!doc.attrs.lang) throw new Error("<html> has no lang");
  const heads = findAll(doc, "head");
  const titles = heads.length === 1 ? findAll(heads[0]!, "title") : [];
  if (titles.length !== 1 || !textOf(titles[0]!)) throw new Error("there must be one non-empty <title> in one <head>");
  const mains = findAll(doc, "main");
  if (mains.length !== 1 || findAll(mains[0]!, "h1").length !== 1) throw new Error("there must be one <main> with one <h1>");
  const ids = [doc, ...allElements(doc)].map((e) => e.attrs.id).filter((id): id is string => id !== undefined);
  if (new Set(ids).size !== ids.length) throw new Error(`duplicate ids: ${ids.join(", ")}`);
  const labels = findAll(doc, "label");
  for (const control of [...findAll(doc, "textarea"), ...findAll(doc, "input"), ...findAll(doc, "select")]) {
    const id = control.attrs.id;
    if (!id || !labels.some((l) => l.attrs.for === id && textOf(l))) throw new Error(`<${control.name}> has no <label for> with text`);
  }
  return doc;
}

function allElements(el: Element): Element[] {
  return el.children.flatMap((c) => (typeof c === "string" ? [] : [c, ...allElements(c)]));
}
