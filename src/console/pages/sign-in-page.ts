import { html } from "hono/html";
import { CONSOLE, notice, page, type Html } from "../layout.ts";

/** The credential field is a password field and never refilled: a key is not echoed back. */
export function signInPage(opts: { next: string; name?: string; problem?: string; signedOut?: boolean }): Html {
  return page(
    { title: "Sign in" },
    html`<h1>Sign in to the console</h1>
${opts.signedOut ? notice("ok", "You are signed out.") : ""}
${opts.problem ? notice("error", opts.problem) : ""}
<form class="sign-in" method="post" action="${CONSOLE}/sign-in">
<input type="hidden" name="next" value="${opts.next}">
<label for="credential">Management key or JWT</label>
<input id="credential" name="credential" type="password" autocomplete="off" required maxlength="8192" aria-describedby="credential-hint">
<p id="credential-hint" class="sub">The same credential the API takes as <code>Authorization: Bearer</code>. It is checked, never stored or shown.</p>
<label for="name">Your name</label>
<input id="name" name="name" autocomplete="name" maxlength="200" value="${opts.name ?? ""}" aria-describedby="name-hint">
<p id="name-hint" class="sub">Needed with a key (a key names nobody): recorded as who paused a run or answered an approval. A JWT names you by its subject.</p>
<button type="submit">Sign in</button>
</form>`,
  );
}
