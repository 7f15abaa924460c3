import { BadRequestError } from "../core/errors.ts";
import { toSignalTypeResource } from "./signal-type.ts";
import type { SignalTypeDeps } from "./declare-signal-type.ts";
import { listSignalTypes } from "./signal-types.queries.ts";

/** Signal types by name; the cursor is the last name served (base64url). */
export async function listSignalTypesPage(deps: Pick<SignalTypeDeps, "db">, q: { limit: number; cursor?: string }) {
  let after: string | undefined;
  if (q.cursor !== undefined) {
    after = Buffer.from(q.cursor, "base64url").toString("utf8");
    if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/.test(after)) {
      throw new BadRequestError("the cursor is not one this server handed out", [{ path: "/cursor", message: "is invalid" }]);
    }
  }
  const rows = await listSignalTypes(deps.db, after, q.limit);
  const more = rows.length > q.limit;
  const items = (more ? rows.slice(0, q.limit) : rows).map(toSignalTypeResource);
  const last = items[items.length - 1];
  return { items, next_cursor: more && last ? Buffer.from(last.name).toString("base64url") : null };
}
