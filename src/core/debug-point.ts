/**
 * Named points between two statements where a test can hold one transaction while another
 * commits, so a race (signal vs timeout, signal vs wait) happens in the order the test chooses
 * (after DBOS `src/debugpoint.ts`). With no hook set, a point is one map lookup. Inside SQL
 * functions the same is done with signalbox.debug_point (db/functions/constants.sql): an
 * advisory lock a test holds, taken only in test databases.
 */
export type DebugPointName = "expire-wait:read" | "expire-wait:resolved" | "respond-to-link:checked";

/** Receives what the point is about (a wait id or run id), so a test can pick its own. */
export type DebugHook = (subject: string) => Promise<void> | void;

const hooks = new Map<DebugPointName, DebugHook>();

/** Awaits the hook registered for `name`, if any. */
export async function debugPoint(name: DebugPointName, subject = ""): Promise<void> {
  if (hooks.size === 0) return;
  const hook = hooks.get(name);
  if (hook) await hook(subject);
}

/** Tests only: registers (or with `undefined`, removes) the hook for `name`. */
export function setDebugHook(name: DebugPointName, fn: DebugHook | undefined): void {
  if (fn) hooks.set(name, fn);
  else hooks.delete(name);
}

export function clearDebugHooks(): void {
  hooks.clear();
}
