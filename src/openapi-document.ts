import { createApp, OPENAPI_CONFIG, type AppDeps } from "./app.ts";
import { loadConfig } from "./config.ts";
import { createLogger } from "./core/logger.ts";
import { ChangeFeed } from "./events/change-feed.ts";

/**
 * The OpenAPI document, generated from the route contracts. Building the app touches no
 * database, so placeholders stand in for the connections.
 */
export function openApiDocument(): unknown {
  const deps = {
    db: undefined as unknown as AppDeps["db"],
    config: loadConfig({}),
    log: createLogger("silent"),
    secrets: { apiKeys: [], callbackSecret: new Uint8Array(), linkKeys: [] },
    changes: new ChangeFeed(),
    shutdown: new AbortController().signal,
    readiness: { database: async () => false, worker: () => false },
  } satisfies AppDeps;
  return createApp(deps).getOpenAPI31Document(OPENAPI_CONFIG);
}

export function openApiText(): string {
  return JSON.stringify(openApiDocument(), null, 2) + "\n";
}
