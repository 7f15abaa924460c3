/** What to do after one delivery attempt. */
export type AttemptVerdict = "delivered" | "retry" | "failed";

/** 2xx is delivered; 408, 429, 5xx and network errors may pass, so retry; any other 4xx is permanent. */
export function classifyAttempt(status: number | undefined): AttemptVerdict {
  if (status === undefined) return "retry";
  if (status >= 200 && status < 300) return "delivered";
  if (status === 408 || status === 429 || status >= 500) return "retry";
  return "failed";
}

/** Seconds before attempt n+1 after attempt n failed: base × 2^(n-1), at most an hour. */
export function retryDelayS(baseS: number, attempt: number): number {
  return Math.min(3600, baseS * 2 ** Math.max(0, attempt - 1));
}
