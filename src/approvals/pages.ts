/**
 * The small HTML pages behind approval links: a confirmation form (GET never acts), the result,
 * and error pages. No scripts, no external resources (the Content-Security-Policy says so);
 * every interpolated string goes through `escapeHtml`.
 */

/** Served with every page: nothing loads but inline style, the form posts only to us, no framing. */
export const PAGE_HEADERS: Record<string, string> = {
  "content-type": "text/html; charset=utf-8",
  "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  "cache-control": "no-store",
  "referrer-policy": "no-referrer", // the link is a credential: never pass it on in a Referer
  "x-content-type-options": "nosniff",
  "x-robots-tag": "noindex",
};

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);
}

export interface ConfirmPage {
  response: string;
  responder: string;
  signal: string;
  runId: string;
  expiresAt: Date;
  maxCommentChars: number;
}

export function confirmPage(p: ConfirmPage): string {
  const response = escapeHtml(p.response);
  return layout(
    `Confirm “${p.response}”`,
    `<h1>Confirm your answer</h1>
<p>You are answering <strong>${response}</strong> to <strong>${escapeHtml(p.signal)}</strong> for <strong>${escapeHtml(p.runId)}</strong>, as <strong>${escapeHtml(p.responder)}</strong>.</p>
<p>Nothing is sent until you press the button. This link works once and expires ${when(p.expiresAt)}.</p>
<form method="post">
<label for="comment">Comment (optional)</label>
<textarea id="comment" name="comment" rows="4" maxlength="${p.maxCommentChars}" aria-describedby="comment-hint"></textarea>
<p id="comment-hint" class="hint">At most ${p.maxCommentChars} characters.</p>
<button type="submit">Answer “${response}”</button>
</form>`,
  );
}

export interface ResultPage {
  response: string;
  responder: string;
  signal: string;
  comment?: string;
  /** Still waiting after this answer: a quorum wait counted it as one vote. */
  moreVotesNeeded: boolean;
}

export function resultPage(p: ResultPage): string {
  const comment = p.comment ? `\n<p>Your comment:</p>\n<blockquote><p>${escapeHtml(p.comment)}</p></blockquote>` : "";
  const outcome = p.moreVotesNeeded ? "It counts as one vote; the request is decided once enough people have answered." : "The request has been decided with it.";
  return layout(
    "Answer recorded",
    `<h1>Thank you: your answer was recorded</h1>
<p>You answered <strong>${escapeHtml(p.response)}</strong> to <strong>${escapeHtml(p.signal)}</strong> as <strong>${escapeHtml(p.responder)}</strong>. ${outcome}</p>${comment}
<p>You can close this page.</p>`,
  );
}

export function errorPage(title: string, detail: string): string {
  return layout(title, `<h1>${escapeHtml(title)}</h1>\n<p>${escapeHtml(detail)}</p>`);
}

function when(d: Date): string {
  const text = d.toISOString().replace("T", " ").replace(/:\d\d\.\d{3}Z$/, " UTC");
  return `<time datetime="${d.toISOString()}">${text}</time>`;
}

const STYLE = `body{font-family:system-ui,sans-serif;line-height:1.5;margin:0;color:#1a1a1a;background:#fafafa}
main{max-width:36rem;margin:2rem auto;padding:1.5rem;background:#fff;border:1px solid #ccc;border-radius:6px}
label{display:block;font-weight:600;margin-top:1rem}
textarea{display:block;width:100%;box-sizing:border-box;font:inherit;padding:.5rem;border:1px solid #767676;border-radius:4px}
.hint{font-size:.9rem;color:#555;margin-top:.25rem}
button{font:inherit;font-weight:600;margin-top:1rem;padding:.6rem 1.2rem;border:0;border-radius:4px;background:#0b57d0;color:#fff;cursor:pointer}
:focus-visible{outline:3px solid #e37400;outline-offset:2px}
blockquote{margin:0 0 1rem;padding-left:1rem;border-left:4px solid #ccc;white-space:pre-wrap}`;

function layout(title: string, body: string): string {
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>${escapeHtml(title)} · signalbox</title>
<style>${STYLE}</style>
</head>
<body>
<main>
${body}
</main>
</body>
</html>
`;
}
