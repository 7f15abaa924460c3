/**
 * At most `n` of the calls given to `run` at once; the rest wait their turn, in order.
 */
export class Limit {
  readonly #n: number;
  #running = 0;
  readonly #waiting: Array<() => void> = [];

  constructor(n: number) {
    this.#n = n;
  }

  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.#running >= this.#n) await new Promise<void>((resolve) => this.#waiting.push(resolve));
    else this.#running++;
    try {
      return await work();
    } finally {
      const next = this.#waiting.shift();
      if (next) next();
      else this.#running--;
    }
  }
}
