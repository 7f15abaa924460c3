// Reproduces postgres.js's write to a closed socket (porsager/postgres #1066, #1154, #1208): a
// connection dropped inside a transaction (or a reserved connection) is written to after
// `closed()` nulled its socket, and the write, deferred with setImmediate, throws where no caller
// can catch it. Run as `node null-socket-repro.ts <postgres module path> <database url>`; prints
// one JSON line with what each case ended with. Unpatched, the process dies instead.
const [modulePath, url] = process.argv.slice(2) as [string, string];
import type Postgres from "postgres";
const { default: postgres } = (await import(modulePath)) as { default: typeof Postgres };

const sql = postgres(url, { max: 2, onnotice: () => {}, backoff: () => 0.05 });
const killer = postgres(url, { max: 1, onnotice: () => {} });
const codeOf = (err: unknown): string => String((err as { code?: unknown }).code ?? err);
const within = <T>(p: Promise<T>, ms: number) =>
  Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error("HUNG")), ms).unref())]);

const outcome: Record<string, string> = {};

// 1. A transaction whose backend is killed: the failing statement makes it roll back, and the
//    ROLLBACK is written to the dead connection.
outcome.transaction = await within(
  sql.begin(async (tx) => {
    const [{ pid }] = (await tx`select pg_backend_pid() as pid`) as unknown as [{ pid: number }];
    await killer`select pg_terminate_backend(${pid})`;
    await tx`select pg_sleep(0.2)`; // the backend is gone before or while this is sent
    return "committed";
  }),
  5000,
).catch(codeOf);

// 2. A reserved connection whose backend is killed: every later query on it is written to the
//    dead connection and must fail, not hang and not crash.
const reserved = await sql.reserve();
const [{ pid }] = (await reserved`select pg_backend_pid() as pid`) as unknown as [{ pid: number }];
await killer`select pg_terminate_backend(${pid})`;
outcome.reservedFirst = await within(reserved`select pg_sleep(0.2)`.then(() => "ok"), 5000).catch(codeOf);
outcome.reservedSecond = await within(reserved`select 1`.then(() => "ok"), 5000).catch(codeOf);
reserved.release();

// 3. The pool still works afterwards.
outcome.after = await within(sql`select 1 as one`.then(([r]) => String(r!.one)), 5000).catch(codeOf);

await Promise.all([sql.end({ timeout: 1 }), killer.end({ timeout: 1 })]);
console.log(JSON.stringify(outcome));
