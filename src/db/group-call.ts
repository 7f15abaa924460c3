import { pgCode } from "./transaction.ts";

interface Caller<I, O> {
  items: I[];
  resolve: (answers: O[]) => void;
  reject: (err: unknown) => void;
}

/**
 * Group commit for any set-based statement: callers that arrive in the same turn of the event
 * loop, or while every slot has a call in flight, go together in one call (their items
 * concatenated, each caller answered with its own slice). Under light load a call goes at once
 * (a microtask later), so nothing waits for a timer; under load, many small callers (delivery
 * jobs of a few callbacks each) share one round trip and one commit. A Postgres error (it has a
 * SQLSTATE) in a shared call sends each caller again alone, so one bad caller cannot fail its
 * neighbours.
 */
export class GroupCall<I, O> {
  readonly #run: (items: I[]) => Promise<O[]>;
  readonly #slots: number;
  readonly #maxItems: number;
  #queue: Array<Caller<I, O>> = [];
  #inFlight = 0;
  #pumpQueued = false;

  constructor(run: (items: I[]) => Promise<O[]>, opts: { slots: number; maxItems: number }) {
    this.#run = run;
    this.#slots = opts.slots;
    this.#maxItems = opts.maxItems;
  }

  call(items: I[]): Promise<O[]> {
    if (items.length === 0) return Promise.resolve([]);
    return new Promise((resolve, reject) => {
      this.#queue.push({ items, resolve, reject });
      // A microtask later, not now: callers of the same turn (a job recording each of its
      // callbacks as a caller of its own) then take one call, where the first two of them took
      // a free slot each, alone.
      if (!this.#pumpQueued) {
        this.#pumpQueued = true;
        queueMicrotask(() => {
          this.#pumpQueued = false;
          this.#pump();
        });
      }
    });
  }

  #pump() {
    while (this.#inFlight < this.#slots && this.#queue.length > 0) {
      const group = this.#queue.splice(0, this.#groupLength());
      this.#inFlight++;
      void this.#send(group).finally(() => {
        this.#inFlight--;
        this.#pump();
      });
    }
  }

  /** Callers the next call takes: at least one, and as many more as fit in maxItems. */
  #groupLength(): number {
    let n = 0;
    let items = 0;
    while (n < this.#queue.length && (n === 0 || items + this.#queue[n]!.items.length <= this.#maxItems)) items += this.#queue[n++]!.items.length;
    return n;
  }

  async #send(group: Array<Caller<I, O>>): Promise<void> {
    try {
      const answers = await this.#run(group.flatMap((c) => c.items));
      let at = 0;
      for (const c of group) {
        c.resolve(answers.slice(at, at + c.items.length));
        at += c.items.length;
      }
    } catch (err) {
      if (group.length === 1 || !pgCode(err)) return group.forEach((c) => c.reject(err));
      // One after another: a failed group of hundreds must not take every pooled connection at once.
      for (const c of group) await this.#send([c]);
    }
  }
}
