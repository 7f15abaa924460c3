// @signalbox/client: the engine side of signalbox.
export { createClient, paginate, type CallOptions, type ClientOptions, type SendOptions, type SendResult, type SignalboxClient } from "./client.ts";
export { SignalboxConnectionError, SignalboxProblem, WaitTimeoutError } from "./problem.ts";
export { isTransient, type RetryOptions } from "./retry.ts";
export type { WaitForOptions } from "./wait-for.ts";
export type { FollowOptions } from "./follow-run-events.ts";
export { CallbackVerificationError, signCallback, verifyCallback, type HeadersLike, type RawBody, type VerifyOptions } from "./verify-callback.ts";
export {
  expressCallbackHandler,
  fetchCallbackHandler,
  honoCallbackHandler,
  nodeCallbackHandler,
  type CallbackHandlerOptions,
  type HonoContextLike,
  type NodeRequestLike,
  type NodeResponseLike,
} from "./callback-handlers.ts";
export type * from "./types.ts";
export type { components, operations, paths } from "./generated/openapi.ts";
