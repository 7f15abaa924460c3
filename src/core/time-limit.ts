/**
 * `p`, or an error once `ms` passed without it settling. Whatever `p` was doing goes on without
 * us: the caller ends it (its connection, say) and handles what it settles to later, if anything.
 */
export function withinMs<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms / 1000} s`)), ms)));
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}
