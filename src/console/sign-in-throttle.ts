import { TokenBuckets, type Rate } from "../http/rate-limit.ts";

/** Addresses remembered at most (the longest-blocked are forgotten first past it). */
const MAX_BLOCKED = 10_000;

/**
 * Failed sign-ins per client address: a burst of them, then one every so often. Once over,
 * the address is refused before its credential is even checked (so guessing cannot go on, and
 * a right guess is not told apart). Successful sign-ins cost nothing.
 */
export class SignInThrottle {
  readonly #failures: TokenBuckets;
  readonly #blockedUntil = new Map<string, number>();
  /** Addresses whose credential is being checked: one check at a time each, so a burst sent at once is counted as it goes, not after. */
  readonly #checking = new Set<string>();

  constructor(rate: Rate) {
    this.#failures = new TokenBuckets(rate);
  }

  /** Seconds the address must wait before another attempt; 0 when it may try now. */
  waitS(address: string, nowMs: number): number {
    const until = this.#blockedUntil.get(address);
    if (until === undefined) return 0;
    if (until <= nowMs) {
      this.#blockedUntil.delete(address);
      return 0;
    }
    return (until - nowMs) / 1000;
  }

  /** Whether the address may have a credential checked now (none of its own is being checked); then `done` when it is. */
  begin(address: string): boolean {
    if (this.#checking.has(address)) return false;
    this.#checking.add(address);
    return true;
  }

  done(address: string): void {
    this.#checking.delete(address);
  }

  /** Counts a failed attempt; returns the seconds the address is now blocked for (0: not blocked). */
  failed(address: string, nowMs: number): number {
    const waitS = this.#failures.take(address, nowMs);
    if (waitS > 0) {
      this.#blockedUntil.delete(address);
      this.#blockedUntil.set(address, nowMs + waitS * 1000);
      if (this.#blockedUntil.size > MAX_BLOCKED) this.#blockedUntil.delete(this.#blockedUntil.keys().next().value!);
    }
    return waitS;
  }
}
