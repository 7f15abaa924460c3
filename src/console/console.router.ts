import { randomBytes } from "node:crypto";
import { Hono, type Context } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { Deps } from "../deps.ts";
import { BadRequestError, ServiceError } from "../core/errors.ts";
import type { Metrics } from "../core/metrics.ts";
import { isDatabaseUnavailable } from "../db/availability.ts";
import type { ChangeFeed } from "../events/change-feed.ts";
import { parseEventId } from "../events/events.queries.ts";
import { addressKey, clientAddress, proxyList } from "../http/rate-limit.ts";
import { cancelRun, pauseRun, resumeRun } from "../runs/control-run.ts";
import { redeliverWait } from "../waits/cancel-wait.ts";
import { redeliverStart } from "../delivery/deliver-start.ts";
import { redriveSignal } from "../signals/redrive-signal.ts";
import { runEventStream } from "../runs/run-event-stream.ts";
import { answerApproval } from "./answer-approval.ts";
import { ASSETS } from "./assets.ts";
import { CONSOLE, type Html, type PageFrame } from "./layout.ts";
import { approvalsPage } from "./pages/approvals-page.ts";
import { deliveriesPage, deliveriesUrl, parseDeliveriesQuery } from "./pages/deliveries-page.ts";
import { errorPage } from "./pages/error-page.ts";
import { overviewPage } from "./pages/overview-page.ts";
import { runPage, runPath } from "./pages/run-page.ts";
import { parseSignalsQuery, signalsPage, signalsUrl } from "./pages/signals-page.ts";
import { signInPage } from "./pages/sign-in-page.ts";
import { signalTypePage, signalTypesPage } from "./pages/signal-types-page.ts";
import { waitsPage } from "./pages/waits-page.ts";
import { RUN_ID, SIGNAL_NAME } from "../core/names.ts";
import { SIGNAL_ID } from "./query-values.ts";
import { signalPage } from "./pages/signal-page.ts";
import { redeliverMatching } from "./redeliver-matching.ts";
import { securityHeaders } from "./security-headers.ts";
import { SESSION_COOKIE, SessionKeys, type Session } from "./session.ts";
import { toStorable } from "../core/storable-text.ts";
import { signIn } from "./sign-in.ts";
import { SignInThrottle } from "./sign-in-throttle.ts";

export interface ConsoleDeps extends Deps {
  changes: ChangeFeed;
  shutdown: AbortSignal;
  metrics: Metrics;
  /** The API's own bearer-token check: the console signs in with exactly the same credentials. */
  verifyToken(token: string | undefined): Promise<boolean>;
}

type ConsoleEnv = { Variables: { session: Session; csrf: string; form: URLSearchParams } };

/** The console authenticates with its own session cookie, not a bearer token (app.ts lets it through). */
export const isConsolePath = (path: string) => path === CONSOLE || path.startsWith(`${CONSOLE}/`);

/** Failed sign-ins one client address (an IPv6 /64: addressKey) may make: a burst of 10, then one every 6 s. */
const SIGN_IN_RATE = { perS: 1 / 6, burst: 10 };
const FORM_TYPE = /^application\/x-www-form-urlencoded\b/i;
const PAGE_TYPE = { "content-type": "text/html; charset=utf-8" };

/**
 * The operator console under /console: server-rendered pages that call the same verbs as the
 * API routers (findWaits, getRun, pauseRun, sendSignal, ...), never the other way round.
 */
export function consoleRouter(deps: ConsoleDeps) {
  // Never the callback secret: every engine and receiver holds it to check callbacks, and could
  // then seal a session. The approval-link signing key is signalbox's alone (and, like a console
  // key, the same on every replica that shares links).
  // (There is always a link key, generated when none is configured; none only where the app is
  // built to describe it, for the OpenAPI document: then a key of the moment.)
  const secret = deps.config.SIGNALBOX_CONSOLE_KEY ? Buffer.from(deps.config.SIGNALBOX_CONSOLE_KEY, "utf8") : (deps.secrets.linkKeys[0]?.secret ?? randomBytes(32));
  const keys = new SessionKeys(secret);
  // A session made with a key that is no longer configured ends at its next request.
  const liveKeyPrints = new Set(deps.secrets.apiKeys.map((k) => keys.keyPrint(k)));
  // Nor does one made with tokens no longer accepted (no JWT secret or JWKS configured now).
  const jwtSignIn = Boolean(deps.config.SIGNALBOX_JWT_SECRET || deps.config.SIGNALBOX_JWKS_URL);
  const signIns = new SignInThrottle(SIGN_IN_RATE);
  const proxies = proxyList(deps.config.SIGNALBOX_TRUSTED_PROXIES);
  const nowS = () => Math.floor(Date.now() / 1000);
  const frameOf = (c: Context<ConsoleEnv>): Omit<PageFrame, "title"> => {
    const session = c.get("session");
    return session ? { who: session.who, csrf: c.get("csrf") } : {};
  };
  const render = async (c: Context, body: Html, status: ContentfulStatusCode = 200, headers: Record<string, string> = {}) =>
    c.body(String(await body), status, { ...PAGE_TYPE, ...headers });
  const secureCookie = (c: Context) => new URL(c.req.url).protocol === "https:" || deps.config.SIGNALBOX_PUBLIC_URL?.startsWith("https:") === true;

  const app = new Hono<ConsoleEnv>();
  app.use(securityHeaders());

  app.onError((err, c) => {
    if (isDatabaseUnavailable(err)) {
      return render(c, errorPage(frameOf(c), "The database is unavailable", "Try again in a moment."), 503, { "retry-after": "1" });
    }
    if (err instanceof ServiceError) return render(c, errorPage(frameOf(c), titleFor(err.status), err.message), err.status as ContentfulStatusCode);
    deps.log.error({ err: { type: (err as Error)?.name, message: String((err as Error)?.message ?? err).split("\n")[0] } }, "console page failed");
    return render(c, errorPage(frameOf(c), "Something went wrong", `The page could not be made; quote request id ${c.get("requestId") ?? "-"} when reporting it.`), 500);
  });

  app.get("/assets/:name", (c) => {
    const asset = ASSETS.get(c.req.param("name"));
    if (!asset) return render(c, errorPage({}, "Not found", "No such file."), 404);
    return c.body(new Uint8Array(asset.body), 200, { "content-type": asset.type, "cache-control": "public, max-age=31536000, immutable" });
  });

  app.get("/sign-in", (c) => render(c, signInPage({ next: safeNext(c.req.query("next")), signedOut: c.req.query("signed_out") === "1" })));
  app.post("/sign-in", async (c) => {
    const address = clientAddress(c, proxies);
    // Throttled as one client: a whole IPv6 /64, or an IPv4 address however it is written.
    const client = addressKey(address);
    const tooMany = (waitS: number) => {
      const retry = String(Math.ceil(waitS));
      return render(c, signInPage({ next: CONSOLE, problem: `Too many failed sign-ins from your address: try again in ${retry} s.` }), 429, { "retry-after": retry });
    };
    // A form posted from another site would sign this browser in as whoever's credential it
    // carries (login CSRF): browsers say where a request comes from.
    const site = c.req.header("sec-fetch-site");
    if (site !== undefined && site !== "same-origin" && site !== "none") {
      return render(c, errorPage({}, "This form cannot be used", "It was not sent from this console; nobody was signed in."), 403);
    }
    const blockedS = signIns.waitS(client, Date.now());
    if (blockedS > 0) return tooMany(blockedS);
    if (!signIns.begin(client)) return tooMany(1);
    let form: URLSearchParams;
    let result: Awaited<ReturnType<typeof signIn>>;
    try {
      form = await readForm(c);
      result = await signIn({ credential: form.get("credential") ?? "", name: form.get("name") ?? "" }, { verifyToken: deps.verifyToken, apiKeys: deps.secrets.apiKeys, keys, sessionS: deps.config.SIGNALBOX_CONSOLE_SESSION_S, nowS: nowS() });
      if (!result.ok) signIns.failed(client, Date.now());
    } finally {
      signIns.done(client);
    }
    const next = safeNext(form.get("next") ?? undefined);
    const name = form.get("name") ?? "";
    if (!result.ok) {
      deps.log.info({ address }, "console sign-in refused");
      const waitS = signIns.waitS(client, Date.now());
      if (waitS > 0) return tooMany(waitS);
      return render(c, signInPage({ next, name, problem: result.problem }), 401);
    }
    setCookie(c, SESSION_COOKIE, keys.seal(result.session), {
      path: CONSOLE,
      httpOnly: true,
      sameSite: "Strict",
      secure: secureCookie(c),
      maxAge: Math.max(1, result.session.exp - nowS()),
    });
    return c.redirect(next, 303);
  });

  app.use(async function requireSession(c, next) {
    const session = keys.open(getCookie(c, SESSION_COOKIE), nowS());
    if (!session || (session.via === "key" && !liveKeyPrints.has(session.keyPrint ?? "")) || (session.via === "jwt" && !jwtSignIn)) {
      if (c.req.method === "GET" || c.req.method === "HEAD") {
        const url = new URL(c.req.url);
        return c.redirect(`${CONSOLE}/sign-in?next=${encodeURIComponent(url.pathname + url.search)}`, 303);
      }
      return render(c, errorPage({}, "Please sign in again", "Your session has ended; nothing was changed."), 401);
    }
    c.set("session", session);
    c.set("csrf", keys.csrfToken(session));
    return next();
  });

  // Every state change is a POSTed form carrying the session's CSRF token; a forged one changes nothing.
  app.use(async function requireCsrfToken(c, next) {
    if (c.req.method !== "POST") return next();
    const form = await readForm(c);
    if (!keys.checkCsrf(c.get("session"), form.get("_csrf"))) {
      return render(c, errorPage(frameOf(c), "This form cannot be used", "It is out of date or was not sent from this console; nothing was changed. Reload the page and try again."), 403);
    }
    c.set("form", form);
    return next();
  });

  app.post("/sign-out", (c) => {
    deleteCookie(c, SESSION_COOKIE, { path: CONSOLE, httpOnly: true, sameSite: "Strict", secure: secureCookie(c) });
    return c.redirect(`${CONSOLE}/sign-in?signed_out=1`, 303);
  });

  app.get("/", (c) => c.redirect(`${CONSOLE}/overview`, 303));
  app.get("/overview", async (c) => render(c, await overviewPage(deps, frameOf(c))));

  app.get("/waits", async (c) => {
    const shown = await waitsPage(deps, new URL(c.req.url).searchParams, frameOf(c));
    return render(c, shown.body, shown.status);
  });

  app.get("/runs/:run", async (c) => render(c, await runPage(deps, runIdOf(c.req.param("run")), new URL(c.req.url).searchParams, { ...frameOf(c), csrf: c.get("csrf") })));
  app.post("/runs/:run/:verb{pause|resume|cancel}", async (c) => {
    const runId = runIdOf(c.req.param("run"));
    const form = c.get("form");
    const reason = toStorable((form.get("reason") ?? "").trim().slice(0, 1000)) || undefined;
    const input = { runId, by: c.get("session").who, ...(reason ? { reason } : {}) };
    const verb = c.req.param("verb");
    if (verb === "pause") await pauseRun(deps, input);
    else if (verb === "resume") await resumeRun(deps, input);
    else await cancelRun(deps, input);
    const done = { pause: "paused", resume: "resumed", cancel: "cancelled" }[verb];
    return c.redirect(`${runPath(runId)}?done=${done}`, 303);
  });
  app.get("/runs/:run/events", async (c) => {
    const runId = runIdOf(c.req.param("run"));
    // An empty Last-Event-ID is no last event (as the API's stream reads it): ?after= stands.
    const from = c.req.header("last-event-id") || c.req.query("after") || "";
    const afterId = from === "" ? 0 : parseEventId(from);
    if (afterId === undefined) throw new BadRequestError("after must be an event id (ev_...)");
    // Unnamed messages: the page's EventSource reads them with onmessage (assets/console.js).
    return runEventStream(deps, runId, afterId, c.req.raw, (event) => ({ id: event.id, data: JSON.stringify(event) }));
  });

  app.get("/signal-types", async (c) => render(c, await signalTypesPage(deps, new URL(c.req.url).searchParams, frameOf(c))));
  app.get("/signal-types/:name", async (c) => {
    const name = c.req.param("name");
    if (!SIGNAL_NAME.test(name)) throw new BadRequestError("a signal name is 1 to 100 characters from A-Z a-z 0-9 . _ -");
    const baseUrl = (deps.config.SIGNALBOX_PUBLIC_URL ?? new URL(c.req.url).origin).replace(/\/+$/, "");
    return render(c, await signalTypePage(deps, name, baseUrl, { ...frameOf(c), section: "signal-types" }));
  });

  app.get("/approvals", async (c) => render(c, await approvalsPage(deps, new URL(c.req.url).searchParams, { ...frameOf(c), csrf: c.get("csrf") })));
  app.post("/approvals/:id", async (c) => {
    const form = c.get("form");
    const waitId = waitIdOf(c.req.param("id"));
    const { answer, stillWaiting, signal } = await answerApproval(deps, {
      waitId,
      response: form.get("response") ?? "",
      responder: c.get("session").who,
      ...(form.get("comment") ? { comment: form.get("comment")! } : {}),
    });
    if (answer.outcome === "received") deps.metrics.signals.inc({ signal, outcome: "received" });
    const said = answer.outcome === "received" && stillWaiting ? "vote" : answer.outcome;
    return c.redirect(`${CONSOLE}/approvals?answered=${encodeURIComponent(said)}`, 303);
  });

  app.get("/signals", async (c) => {
    const shown = await signalsPage(deps, new URL(c.req.url).searchParams, { ...frameOf(c), csrf: c.get("csrf") });
    return render(c, shown.body, shown.status);
  });
  app.get("/signals/:id", async (c) => {
    const id = c.req.param("id");
    if (!SIGNAL_ID.test(id)) throw new BadRequestError("a signal id is sg_ followed by letters and digits");
    return render(c, await signalPage(deps, id, frameOf(c)));
  });
  // A dead letter sent again through the verb of POST /signals/redrive; the form sends the page's filter back.
  app.post("/signals/:id/redrive", async (c) => {
    const id = c.req.param("id");
    if (!SIGNAL_ID.test(id)) throw new BadRequestError("a signal id is sg_ followed by letters and digits");
    const { query } = parseSignalsQuery(c.get("form"));
    const answer = await redriveSignal(deps, id);
    return c.redirect(signalsUrl(query, { redriven: answer.outcome, ...(answer.signal_id ? { as: answer.signal_id } : {}) }), 303);
  });

  app.get("/deliveries", async (c) => {
    const shown = await deliveriesPage(deps, new URL(c.req.url).searchParams, { ...frameOf(c), csrf: c.get("csrf") });
    return render(c, shown.body, shown.status);
  });
  // Both redeliver forms send the page's filter back, so the redirect returns to the same view.
  app.post("/deliveries/redeliver", async (c) => {
    const { query, problems } = parseDeliveriesQuery(c.get("form"));
    if (problems.length > 0) throw new BadRequestError(problems.join(" "));
    const filter = { ...(query.status ? { status: query.status } : {}), ...(query.callbackHost ? { callbackHost: query.callbackHost } : {}) };
    const done = await redeliverMatching(deps, filter);
    return c.redirect(deliveriesUrl(filter, { redelivered: String(done.redelivered), ...(done.skipped ? { skipped: String(done.skipped) } : {}), ...(done.more ? { more: "1" } : {}) }), 303);
  });
  // A run start's event (signal-with-start), through the verb of POST /runs/{run}/start/redeliver.
  app.post("/deliveries/starts/:run/redeliver", async (c) => {
    const run = c.req.param("run");
    if (!RUN_ID.test(run)) throw new BadRequestError("a run id is 1 to 200 characters from A-Z a-z 0-9 . _ : @ -, and not . or ..");
    const { query } = parseDeliveriesQuery(c.get("form"));
    await redeliverStart(deps, run);
    return c.redirect(deliveriesUrl(query, { redelivered: "1" }), 303);
  });
  app.post("/deliveries/:id/redeliver", async (c) => {
    const waitId = waitIdOf(c.req.param("id"));
    const { query } = parseDeliveriesQuery(c.get("form"));
    await redeliverWait(deps, waitId);
    return c.redirect(deliveriesUrl(query, { redelivered: "1" }), 303);
  });

  app.all("*", (c) => {
    if (c.req.method === "GET" && new URL(c.req.url).pathname === `${CONSOLE}/`) return c.redirect(`${CONSOLE}/overview`, 303);
    return render(c, errorPage(frameOf(c), "Not found", `The console has no page at ${new URL(c.req.url).pathname}.`), 404);
  });
  return app;
}

/** A state-changing form: urlencoded only (what our forms send), read within the app's body limit. */
async function readForm(c: Context): Promise<URLSearchParams> {
  if (!FORM_TYPE.test(c.req.header("content-type") ?? "")) throw new ServiceError(415, "Unsupported Media Type", "send the form as application/x-www-form-urlencoded");
  return new URLSearchParams(await c.req.text());
}

/** Where to go after signing in: a console page on this server, never another site. */
function safeNext(next: string | undefined): string {
  if (!next || !/^\/console(\/[A-Za-z0-9._~:@!$&'()*+,;=%/?-]*)?$/.test(next) || next.startsWith(`${CONSOLE}/sign-in`) || next.includes("//") || /\/(\.|%2e){1,2}(\/|$|\?)/i.test(next)) return `${CONSOLE}/waits`;
  return next;
}

function runIdOf(runId: string): string {
  if (!RUN_ID.test(runId)) throw new BadRequestError("a run id is 1 to 200 characters from A-Z a-z 0-9 . _ : @ -, and not . or ..");
  return runId;
}

function waitIdOf(waitId: string): string {
  if (!/^wt_[0-9a-z]{1,64}$/.test(waitId)) throw new BadRequestError("not a wait id");
  return waitId;
}

function titleFor(status: number): string {
  if (status === 404) return "Not found";
  if (status === 409) return "That cannot be done now";
  if (status === 415 || status === 400 || status === 422) return "That request cannot be used";
  if (status === 503) return "Busy: try again shortly";
  return "That did not work";
}
