import type { Deps } from "../deps.ts";
import { ConflictError, NotFoundError } from "../core/errors.ts";
import { newId } from "../core/ids.ts";
import { findSignalType } from "../signal-types/signal-types.queries.ts";
import { findWait } from "../waits/waits.queries.ts";
import { signLink } from "./approval-links.ts";

export interface CreateLinksInput {
  waitId: string;
  ttlS: number;
  responder: string;
  /** Where the links point: SIGNALBOX_PUBLIC_URL, or the origin of the request that asked. */
  baseUrl: string;
}

export interface ApprovalLinks {
  links: Record<string, string>;
  expiresAt: Date;
}

/**
 * Makes one signed link per allowed response of the wait's signal type, for one responder.
 * They expire at `ttlS` or the wait's deadline, whichever is first, and share one link id: the
 * person's answer is one of them, once (src/approvals/respond-to-link.ts).
 */
export async function createLinks(deps: Pick<Deps, "db" | "secrets">, input: CreateLinksInput): Promise<ApprovalLinks> {
  const wait = await findWait(deps.db, input.waitId);
  if (!wait) throw new NotFoundError(`no wait with id '${input.waitId}'`);
  if (wait.status !== "waiting") throw new ConflictError(`wait '${wait.id}' is already ${wait.status}`, { wait_status: wait.status });
  if (wait.kind !== "external") throw new ConflictError(`wait '${wait.id}' is a ${wait.kind} wait: links answer a wait for a signal from outside`);
  const type = await findSignalType(deps.db, wait.signal);
  const responses = type?.responses ?? [];
  if (responses.length === 0) throw new ConflictError(`signal type '${wait.signal}' declares no responses: approval links need them`);

  const now = new Date();
  // JWT expiry has whole seconds: a ttl rounds up (a 1 s link lives at least 1 s), the wait's
  // deadline rounds down (a link never outlives it).
  const ttlEnd = Math.ceil((now.getTime() + input.ttlS * 1000) / 1000) * 1000;
  const deadline = wait.timeoutAt ? Math.floor(wait.timeoutAt.getTime() / 1000) * 1000 : Infinity;
  const expiresAt = new Date(Math.min(ttlEnd, deadline));
  if (expiresAt.getTime() <= now.getTime()) throw new ConflictError(`wait '${wait.id}' reaches its deadline too soon for a link`);

  const linkId = newId("lk");
  const base = input.baseUrl.replace(/\/+$/, "");
  const entries = await Promise.all(
    responses.map(async (response) => {
      const token = await signLink(deps.secrets.linkKeys, { waitId: wait.id, version: wait.createdAt.getTime(), response, responder: input.responder, linkId, expiresAt }, now);
      return [response, `${base}/approvals/${token}`] as const;
    }),
  );
  // fromEntries defines own properties: a response named "__proto__" is a key like any other.
  return { links: Object.fromEntries(entries), expiresAt };
}
