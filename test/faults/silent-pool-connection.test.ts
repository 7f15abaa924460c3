import { it } from "vitest";
import { serviceOnOwnPostgres } from "../helpers/own-postgres-service.ts";
import { expectSilentPoolConnectionReplaced } from "../helpers/silent-pool.ts";

// A pool connection gone silent (test/helpers/silent-pool.ts); over TLS: silent-pool-connection-tls.test.ts.
const own = serviceOnOwnPostgres("silent-pool");

it("a pool connection gone silent answers 503 soon and is replaced", () => expectSilentPoolConnectionReplaced(own), 90_000);
