import { describe, expect, it } from "vitest";
import { GroupCall } from "../../src/db/group-call.ts";

// Group commit for set-based statements (src/db/group-call.ts): the calls it makes, on a
// statement the test answers itself.

function deferred<T>() {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

function recorder(opts: { slots: number; maxItems: number }) {
  const calls: Array<{ items: number[]; done: ReturnType<typeof deferred<number[]>> }> = [];
  const group = new GroupCall<number, number>((items) => {
    const done = deferred<number[]>();
    calls.push({ items, done });
    return done.promise;
  }, opts);
  return { group, calls };
}

const tick = () => new Promise((r) => setImmediate(r));

describe("GroupCall", () => {
  it("sends a caller at once (a microtask later) while a slot is free, and those who came meanwhile together, each answered with its own slice", async () => {
    const { group, calls } = recorder({ slots: 1, maxItems: 10 });
    const first = group.call([1, 2]);
    await Promise.resolve();
    expect(calls.map((c) => c.items)).toEqual([[1, 2]]);
    const second = group.call([3]);
    const third = group.call([4, 5]);
    calls[0]!.done.resolve([10, 20]);
    expect(await first).toEqual([10, 20]);
    await tick();
    expect(calls.map((c) => c.items)).toEqual([[1, 2], [3, 4, 5]]);
    calls[1]!.done.resolve([30, 40, 50]);
    expect(await second).toEqual([30]);
    expect(await third).toEqual([40, 50]);
  });

  it("sends the callers of one turn in one call, though slots are free", async () => {
    const { group, calls } = recorder({ slots: 2, maxItems: 10 });
    const callers = [[1], [2], [3, 4]].map((items) => group.call(items));
    await Promise.resolve();
    expect(calls.map((c) => c.items)).toEqual([[1, 2, 3, 4]]);
    calls[0]!.done.resolve([10, 20, 30, 40]);
    expect(await Promise.all(callers)).toEqual([[10], [20], [30, 40]]);
  });

  it("keeps a caller's items together and a call within maxItems (a larger caller goes alone)", async () => {
    const { group, calls } = recorder({ slots: 1, maxItems: 3 });
    void group.call([0]);
    const callers = [[1, 2], [3], [4, 5, 6, 7], [8]].map((items) => group.call(items));
    await Promise.resolve();
    for (let i = 0; i < 4; i++) {
      calls[i]!.done.resolve(calls[i]!.items.map((n) => n * 10));
      await tick();
    }
    expect(calls.map((c) => c.items)).toEqual([[0, 1, 2], [3], [4, 5, 6, 7], [8]]);
    expect(await Promise.all(callers)).toEqual([[10, 20], [30], [40, 50, 60, 70], [80]]);
  });

  it("a Postgres error in a shared call sends each caller again alone: only the bad one fails", async () => {
    const group = new GroupCall<number, number>(async (items) => {
      await tick();
      if (items.includes(13)) throw Object.assign(new Error("bad item"), { code: "22P02" });
      return items;
    }, { slots: 1, maxItems: 10 });
    void group.call([0]);
    const good = group.call([1, 2]);
    const bad = group.call([13]);
    const alsoGood = group.call([3]);
    expect(await good).toEqual([1, 2]);
    await expect(bad).rejects.toThrow("bad item");
    expect(await alsoGood).toEqual([3]);
  });

  it("an error without a SQLSTATE (the connection broke) fails every caller of the call: none is sent twice", async () => {
    let calls = 0;
    const group = new GroupCall<number, number>(async () => {
      calls++;
      await tick();
      throw new Error("connection closed");
    }, { slots: 1, maxItems: 10 });
    const results = await Promise.allSettled([group.call([1]), group.call([2]), group.call([3])]);
    expect(results.map((r) => r.status)).toEqual(["rejected", "rejected", "rejected"]);
    expect(calls).toBe(1); // the three of one turn, together
  });
});
