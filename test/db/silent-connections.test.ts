import { expect, it } from "vitest";
import { openDatabase } from "../../src/db/client.ts";

// A database host the kernel has no route to fails connect() at once (ENETUNREACH; on Linux
// 255.255.255.255 always does, as does any address once its route is gone). The pool's socket
// factory (src/db/silent-connections.ts) must not emit that error before postgres.js listens
// for it (it awaits the factory): it was uncaught (the process exits) and the query never settled.
it("a connect that fails synchronously rejects the query and throws nothing uncaught", async () => {
  const uncaught: string[] = [];
  const onUncaught = (err: unknown) => uncaught.push(String(err));
  const vitestHandlers = process.listeners("uncaughtException");
  process.removeAllListeners("uncaughtException");
  process.on("uncaughtException", onUncaught);
  const db = openDatabase("postgres://u:p@255.255.255.255:5432/db", { max: 1 });
  try {
    const outcome = await Promise.race([
      db.sql`select 1`.then(() => "answered", (e: Error & { code?: string }) => `rejected ${e.code ?? e.message}`),
      new Promise((r) => setTimeout(() => r("still pending after 3 s"), 3_000)),
    ]);
    expect({ outcome, uncaught: uncaught.slice(0, 1), uncaughtCount: uncaught.length }).toEqual({ outcome: "rejected ENETUNREACH", uncaught: [], uncaughtCount: 0 });
  } finally {
    void db.sql.end({ timeout: 0 }).catch(() => {});
    await new Promise((r) => setTimeout(r, 100));
    process.off("uncaughtException", onUncaught);
    for (const h of vitestHandlers) process.on("uncaughtException", h);
  }
});
