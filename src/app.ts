import { setTimeout as delay } from "node:timers/promises";
import { OpenAPIHono } from "@hono/zod-openapi";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { Scalar } from "@scalar/hono-api-reference";
import { bodyLimit } from "hono/body-limit";
import { requestId } from "hono/request-id";
import { bearerToken } from "./auth/api-keys.ts";
import { managementAuth, tokenVerifier } from "./auth/management-auth.ts";
import { pgCode } from "./db/transaction.ts";
import type { Deps } from "./deps.ts";
import { PayloadTooLargeError, ServiceError, ServiceUnavailableError } from "./core/errors.ts";
import { isDatabaseUnavailable, type DatabaseAvailability } from "./db/availability.ts";
import { logBudget, requestContext } from "./core/logger.ts";
import { createMetrics } from "./core/metrics.ts";
import { healthRouter, type ReadinessChecks } from "./http/health.router.ts";
import { DOCS_BUNDLE_PATH, DOCS_CONFIGURATION, docsBundle } from "./http/api-docs.ts";
import { chain } from "./http/chain.ts";
import { inputGuard } from "./http/input-guard.ts";
import { metricsRouter } from "./http/metrics.router.ts";
import { rateLimit } from "./http/rate-limit.ts";
import { defaultHook } from "./http/openapi.ts";
import { problemFromError, problemResponse } from "./http/problem.ts";
import { runsRouter } from "./runs/runs.router.ts";
import { signalTypesRouter } from "./signal-types/signal-types.router.ts";
import { signalsRouter } from "./signals/signals.router.ts";
import type { ChangeFeed } from "./events/change-feed.ts";
import { waitsRouter } from "./waits/waits.router.ts";
import { APPROVAL_LINK_PREFIX, approvalsRouter } from "./approvals/approvals.router.ts";
import { deliveriesRouter } from "./delivery/deliveries.router.ts";
import { consoleRouter, isConsolePath } from "./console/console.router.ts";
import { answerableInstead } from "./http/held-request.ts";

export interface AppDeps extends Deps {
  changes: ChangeFeed;
  readiness: ReadinessChecks;
  /** Aborted on SIGTERM: held long-polls answer at once. */
  shutdown: AbortSignal;
  /** Whether the database is reachable: while it is not, requests that need it answer 503 at once. */
  availability?: DatabaseAvailability;
}

const PUBLIC_PATHS = new Set(["/healthz", "/readyz", "/metrics", "/openapi.json", "/docs", DOCS_BUNDLE_PATH]);
/** Public paths that cost work; the probes stay unlimited (an orchestrator must always get an answer). */
const RATE_LIMITED_PATHS = new Set(["/metrics", "/openapi.json", "/docs", DOCS_BUNDLE_PATH]);
/** Approval links carry their own credential (a signed token in the path). */
const isApprovalLink = (path: string) => path.startsWith(APPROVAL_LINK_PREFIX);
const INTAKE = /^\/signals\/[^/]+\/[^/]+$/;
const isIntake = (method: string, path: string) => method === "POST" && INTAKE.test(path) && path !== "/signals/batch";
/** Routes that read and cap their raw bodies themselves, after their own credential: nothing reads them before. */
const readsOwnBody = (method: string, path: string) => isIntake(method, path) || isApprovalLink(path);

/** Every name that is no declared signal type counts as this one type: made-up names share one budget. */
const UNDECLARED_SIGNAL = "\u0000undeclared";
/** The per-signal-type bucket of an intake request: its name, or UNDECLARED_SIGNAL (known from memory, no query). */
function intakeBucket(deps: Pick<Deps, "signalTypeCache">, path: string): string {
  const segment = path.split("/")[3] ?? "";
  let name = segment;
  try {
    if (segment.includes("%")) name = decodeURIComponent(segment);
  } catch {
    return UNDECLARED_SIGNAL;
  }
  return deps.signalTypeCache?.isDeclared(name) === false ? UNDECLARED_SIGNAL : name;
}

export const OPENAPI_CONFIG = {
  openapi: "3.1.0",
  info: {
    title: "signalbox",
    version: "0.1.0",
    description:
      "A signal broker for workflow engines: waits, signals, timeouts and resume callbacks. " +
      "Errors are `application/problem+json` (RFC 9457). Management endpoints take `Authorization: Bearer <token>`; " +
      "`POST /signals/{run}/{signal}` authenticates each request by its signal type's `auth`.",
    // No licence has been chosen for signalbox yet: this says so rather than guess one.
    license: { name: "Apache-2.0", identifier: "Apache-2.0" },
  },
  // Relative: the document is served by the signalbox it describes (clients take a base URL anyway).
  servers: [{ url: "/", description: "The signalbox serving this document" }],
  tags: [
    { name: "Signal types", description: "The declared contract of a signal: payload JSON Schema, sender authentication, buffering" },
    { name: "Waits", description: "A run waiting for a signal, with an optional timeout and resume callback" },
    { name: "Signals", description: "Intake from external systems, and the signal log" },
    { name: "Runs", description: "A run's state, cancellation and history" },
    { name: "Approvals", description: "Signed one-time links a person answers a wait with (the link pages need no token)" },
    { name: "Operations", description: "Health, readiness and Prometheus metrics (no token needed)" },
  ],
};

export function createApp(deps: AppDeps) {
  const metrics = deps.metrics ?? createMetrics();
  const verifyToken = tokenVerifier(deps.secrets.apiKeys, {
    secret: deps.config.SIGNALBOX_JWT_SECRET,
    jwksUrl: deps.config.SIGNALBOX_JWKS_URL,
    issuer: deps.config.SIGNALBOX_JWT_ISSUER,
    audience: deps.config.SIGNALBOX_JWT_AUDIENCE,
  });
  const app = new OpenAPIHono({ defaultHook });

  const setRequestId = requestId(); // honours a well-formed X-Request-Id from the caller
  const mayLogRequest = logBudget(deps.config.SIGNALBOX_LOG_REQUESTS_PER_S);
  const mayLogError = logBudget(deps.config.SIGNALBOX_LOG_REQUESTS_PER_S);
  // Request lines held back are the budget working (info); unhandled errors held back are not (warn).
  const sayHeld = (what: string, level: "info" | "warn") => (count: number) => deps.log[level]({ held: count }, `${what} held back in the last second (SIGNALBOX_LOG_REQUESTS_PER_S)`);
  // Two layers before the routes: what wraps the whole request (its id, log context and line),
  // then the checks, chained (see chain.ts): every layer is kept by each held long-poll.
  app.use(async function requestScope(c, next) {
    await setRequestId(c, async () => {});
    const started = performance.now();
    await requestContext.run({ requestId: c.get("requestId") }, next);
    const seconds = (performance.now() - started) / 1000;
    // routePath is the pattern (/waits/:id), so labels stay few whatever the ids are.
    metrics.httpDuration.observe({ method: c.req.method, route: c.req.routePath, status: String(c.res.status) }, seconds);
    if (mayLogRequest(sayHeld("request lines", "info"))) {
      // Said here, after the request's log context has ended (the mixin no longer adds it).
      deps.log.info({ requestId: c.get("requestId"), method: c.req.method, path: loggedPath(c.req.path), status: c.res.status, ms: Math.round(seconds * 1000) }, "request");
    }
  });
  // Bursts are capped per sender before anything else is done for them, burst twice the rate.
  const rate = (perS: number) => (perS > 0 ? { perS, burst: 2 * perS } : null);
  const bodyTooLarge = () => new PayloadTooLargeError(`the body is larger than ${deps.config.SIGNALBOX_MAX_BODY_BYTES} bytes`);
  app.use(
    chain(
      rateLimit({
        perAddress: rate(deps.config.SIGNALBOX_RATE_LIMIT_PER_ADDRESS),
        perSignalType: rate(deps.config.SIGNALBOX_RATE_LIMIT_PER_SIGNAL_TYPE),
        // Refusals (bad signatures, made-up names, no wait) past their budget are answered late;
        // unset, a tenth of a type's budget.
        perSignalTypeRefusals: rate(deps.config.SIGNALBOX_RATE_LIMIT_REFUSALS_PER_SIGNAL_TYPE ?? deps.config.SIGNALBOX_RATE_LIMIT_PER_SIGNAL_TYPE / 10),
        trustedProxies: deps.config.SIGNALBOX_TRUSTED_PROXIES,
        classify: (method, path) => (isIntake(method, path) ? intakeBucket(deps, path) : RATE_LIMITED_PATHS.has(path) || isApprovalLink(path) ? "" : null),
        isManagement: (authorization) => verifyToken(bearerToken(authorization)),
      }),
      // Who is asking before any body is read: hono's bodyLimit buffers a chunked body whole.
      // The console signs its operators in with the same credentials and keeps a session cookie.
      managementAuth({ skip: (method, path) => PUBLIC_PATHS.has(path) || isIntake(method, path) || isApprovalLink(path) || isConsolePath(path), verify: verifyToken }),
      async function limitBody(c, next) {
        // Intake and approval links read and cap their raw bodies themselves, after their own credential.
        if (readsOwnBody(c.req.method, c.req.path)) return next();
        // A body of declared length is judged by its header here, and one of no body skips the
        // check: hono's bodyLimit first asks for the body stream, and @hono/node-server then
        // builds the whole WHATWG Request (a web stream of the body, an AbortSignal) for every
        // request, GETs included, and reads the body through it rather than straight from the
        // socket. Node's parser reads no more body than the length declared. Chunked ones are
        // counted as they come, by bodyLimit.
        const method = c.req.method;
        if (method === "GET" || method === "HEAD") return next(); // their bodies are never read
        const declared = c.req.header("content-length");
        if (declared !== undefined && c.req.header("transfer-encoding") === undefined) {
          if (Number(declared) > deps.config.SIGNALBOX_MAX_BODY_BYTES) throw bodyTooLarge();
          return next();
        }
        return bodyLimit({
          maxSize: deps.config.SIGNALBOX_MAX_BODY_BYTES,
          onError: () => {
            throw bodyTooLarge();
          },
        })(c, next);
      },
      inputGuard({ skipBody: readsOwnBody }),
      async function failFastWhileDatabaseDown(c, next) {
        const availability = deps.availability;
        // Every route but the public ones reads or writes the database: do not queue for it.
        if (!availability || PUBLIC_PATHS.has(c.req.path)) return next();
        if (!availability.up) throw databaseUnavailable();
        // Nor wait on one that stopped answering meanwhile: 503 then, after a moment in which a
        // route that knows better answers itself (an accepted signal held for its reply: 202).
        const answeredInstead = answerableInstead(c.req.raw);
        const handled = next().then(() => true);
        let stopWatching!: () => void;
        const wentDown = new Promise<false>((resolve) => {
          stopWatching = availability.whenDown(() => void delay(GRACE_WHEN_DOWN_MS).then(() => resolve(false)));
        });
        const answered = await Promise.race([handled, wentDown]).finally(() => stopWatching());
        if (answered) return;
        handled.catch(() => {}); // it ends when the database answers again, or its connection is dropped
        answeredInstead(); // a held request stops holding its place
        throw databaseUnavailable();
      },
    ),
  );

  app.route("/", healthRouter(deps.readiness));
  app.route("/", metricsRouter(deps, metrics));
  app.route("/", signalTypesRouter(deps));
  app.route("/", waitsRouter(deps));
  app.route("/", deliveriesRouter(deps));
  app.route("/", signalsRouter({ ...deps, metrics, isManagementToken: verifyToken }));
  app.route("/", runsRouter(deps));
  app.route("/", approvalsRouter({ ...deps, metrics }));
  app.route("/console", consoleRouter({ ...deps, metrics, verifyToken }));

  app.openAPIRegistry.registerComponent("securitySchemes", "bearerAuth", {
    type: "http",
    scheme: "bearer",
    description: "A key from SIGNALBOX_API_KEYS, or a JWT (HS256 with SIGNALBOX_JWT_SECRET, or SIGNALBOX_JWKS_URL)",
  });
  // Both are public and never change while the process runs: built on first use, then served as they are.
  let openApiText: string | undefined;
  app.get("/openapi.json", (c) => {
    openApiText ??= JSON.stringify(app.getOpenAPI31Document(OPENAPI_CONFIG));
    return c.body(openApiText, 200, { "content-type": "application/json" });
  });
  const docs = Scalar({ ...DOCS_CONFIGURATION });
  let docsHtml: string | undefined;
  app.get("/docs", async (c) => {
    docsHtml ??= await ((await docs(c, async () => {})) as Response).text();
    return c.html(docsHtml);
  });
  app.get(DOCS_BUNDLE_PATH, (c) => {
    const bundle = docsBundle();
    const gzip = /\bgzip\b/.test(c.req.header("accept-encoding") ?? "");
    const headers: Record<string, string> = { "content-type": "text/javascript; charset=utf-8", "cache-control": "public, max-age=31536000, immutable", vary: "accept-encoding" };
    if (gzip) headers["content-encoding"] = "gzip";
    return c.body(new Uint8Array(gzip ? bundle.gzip : bundle.body), 200, headers);
  });

  app.notFound((c) => problemResponse(c, { type: "https://signalbox.dev/problems/not-found", title: "Not Found", status: 404, detail: `no route for ${c.req.method} ${c.req.path}` }));
  app.onError((err, c) => {
    // The client hung up mid-request (its upload cut short): nobody is left to answer, and
    // nothing is wrong here. The access log's one line (499, as nginx says it) is the record.
    if (clientHungUp(c.req.raw, err)) return c.body(null, 499 as ContentfulStatusCode);
    if (!(err instanceof ServiceError) && isDatabaseUnavailable(err)) {
      // The database went away under this request (refused, dropped, shutting down): nothing was
      // answered, so the caller may retry. Not a 500: nothing is wrong with the request or with us.
      deps.availability?.observe(err);
      deps.log.debug({ err: describeError(err) }, "database unavailable");
      err = databaseUnavailable();
    }
    if (err instanceof ServiceError) {
      const headers: Record<string, string> = {};
      if (err.status === 401) headers["www-authenticate"] = 'Bearer realm="signalbox"';
      if (err instanceof ServiceUnavailableError) headers["retry-after"] = String(err.retryAfterS);
      return problemResponse(c, problemFromError(err), headers);
    }
    const status = (err as { status?: unknown }).status;
    if (status === 415) {
      // @hono/zod-openapi's answer to a JSON body sent as another type: a malformed body (API.md), 400.
      return problemResponse(c, { type: "https://signalbox.dev/problems/bad-request", title: "Bad Request", status: 400, detail: "send the body as JSON, with Content-Type: application/json" });
    }
    if (typeof status === "number" && status >= 400 && status < 500) {
      // hono's own HTTPExceptions (e.g. a malformed JSON body): a client error, said plainly.
      return problemResponse(c, { type: "https://signalbox.dev/problems/bad-request", title: "Bad Request", status, detail: err.message || "malformed request" });
    }
    if (mayLogError(sayHeld("unhandled errors", "warn"))) deps.log.error({ err: describeError(err) }, "unhandled error");
    return problemResponse(c, {
      type: "https://signalbox.dev/problems/internal",
      title: "Internal Server Error",
      status: 500,
      detail: `unexpected error; quote request id ${c.get("requestId")} when reporting it`,
    });
  });
  return app;
}

/** Node's error for a request whose connection closed before its body was read, or the request's own abort signal. */
function clientHungUp(req: Request, err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown };
  return req.signal?.aborted === true || (e?.code === "ECONNRESET" && e.message === "aborted");
}

const databaseUnavailable = () => new ServiceUnavailableError("the database is unavailable; retry shortly", 1);

/**
 * What an unexpected error may put in the log: its kind, Postgres code and first line, and the
 * stack. Not the whole error: drizzle's message lists the query parameters, which can hold
 * payloads or signing secrets.
 */
function describeError(err: unknown) {
  const e = err as { name?: string; message?: string; stack?: string; cause?: { message?: string } };
  const firstLine = (text?: string) => (text ?? "").split("\n")[0]!.replace(/params:.*$/s, "params: [redacted]");
  return {
    type: e?.name ?? typeof err,
    code: pgCode(err),
    message: firstLine(e?.cause?.message ?? e?.message),
    stack: (e?.stack ?? "").split("\n").filter((l) => l.trimStart().startsWith("at ")).join("\n"),
  };
}

/** How long a request waiting on a database that stopped answering may still answer itself. */
const GRACE_WHEN_DOWN_MS = 100;

/** The path as logged: an approval link's token is its bearer's credential, never written to a log. */
function loggedPath(path: string): string {
  if (!path.startsWith(APPROVAL_LINK_PREFIX)) return path;
  const rest = path.slice(APPROVAL_LINK_PREFIX.length);
  const slash = rest.indexOf("/");
  return `${APPROVAL_LINK_PREFIX}:token${slash < 0 ? "" : rest.slice(slash)}`;
}
