import { API_KEY, type TestApp } from "../helpers/test-app.ts";

/** A signed-in operator over plain HTTP: the session cookie, and forms posted with its CSRF token. */
export interface ConsoleClient {
  cookie: string;
  /** The session's CSRF token, as a page's forms carry it. */
  csrf: string;
  get(path: string): Promise<Response>;
  /** POSTs a urlencoded form (with the session's CSRF token unless `fields` sets `_csrf`). */
  post(path: string, fields?: Record<string, string>): Promise<Response>;
}

export function signInForm(fields: Record<string, string>): RequestInit {
  return { method: "POST", body: new URLSearchParams(fields), headers: { "content-type": "application/x-www-form-urlencoded" }, redirect: "manual" };
}

export async function signInConsole(app: TestApp, opts: { credential?: string; name?: string } = {}): Promise<ConsoleClient> {
  const res = await fetch(`${app.baseUrl}/console/sign-in`, signInForm({ credential: opts.credential ?? API_KEY, name: opts.name ?? "Kim Operator", next: "/console/waits" }));
  if (res.status !== 303) throw new Error(`sign-in answered ${res.status}: ${await res.text()}`);
  const cookie = res.headers.getSetCookie()[0]!.split(";")[0]!;
  const get = (path: string) => fetch(app.baseUrl + path, { headers: { cookie }, redirect: "manual" });
  const page = await (await get("/console/waits")).text();
  const csrf = /name="_csrf" value="([^"]+)"/.exec(page)?.[1];
  if (!csrf) throw new Error("no CSRF token on the waits page");
  return {
    cookie,
    csrf,
    get,
    post: (path, fields = {}) =>
      fetch(app.baseUrl + path, {
        method: "POST",
        body: new URLSearchParams({ _csrf: csrf, ...fields }),
        headers: { cookie, "content-type": "application/x-www-form-urlencoded" },
        redirect: "manual",
      }),
  };
}
