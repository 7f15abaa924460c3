import { z } from "@hono/zod-openapi";
import { HttpUrlInput } from "../http/openapi.ts";
import { AUTH_SCHEMES } from "./signal-type.ts";

const JSON_POINTER = /^(\/([^~/]|~[01])*)*$/;

/** An endpoint signalbox POSTs to, checked as a wait's callback_url is. */

/** The body of PUT /signal-types/{name}, also the shape of each entry in SIGNALBOX_SIGNAL_TYPES_FILE. */
export const SignalTypeBodySchema = z
  .object({
    description: z.string().max(1000).nullable().optional().openapi({ example: "Manager approves the order" }),
    schema: z
      .union([z.record(z.string(), z.unknown()), z.boolean(), z.null()])
      .optional()
      .openapi({
        description:
          "JSON Schema (draft 2020-12) every payload must satisfy; null accepts any JSON. Bounded (422 otherwise): at most 64 KiB, local `$ref`s only and none leading back into the schema that holds it, and `pattern`s that run in linear time (RE2's syntax: no backreferences or lookarounds)",
        example: { type: "object", required: ["approved"], properties: { approved: { type: "boolean" } } },
      }),
    auth: z
      .object({
        scheme: z.enum(AUTH_SCHEMES),
        secrets: z.array(z.string().min(1).max(500)).max(10).optional().openapi({ description: "Write-only. Several may be active (rotation)." }),
        tolerance_s: z.number().int().min(1).max(86400).optional().openapi({ description: "Timestamp skew allowed both ways (default 300)" }),
        header: z.string().regex(/^[A-Za-z0-9-]{1,100}$/).optional().openapi({ description: "hmac-sha256: the header with the hex digest" }),
        run_pointer: z.string().regex(JSON_POINTER).max(200).optional().openapi({
          description: "JSON Pointer into the payload whose value (a string, or a number as written: 1.0 is not run 1) must equal the run in the URL",
          example: "/metadata/run_id",
        }),
        replay_across_runs: z.boolean().optional().openapi({
          description:
            "github, shopify, hmac-sha256: their signature covers the body only, so a captured delivery verifies for any run. Such a type names `run_pointer`, or sets this to true to accept that.",
        }),
      })
      .strict()
      .superRefine((a, ctx) => {
        if (a.scheme !== "none" && (a.secrets ?? []).length === 0) {
          ctx.addIssue({ code: "custom", path: ["secrets"], message: `scheme '${a.scheme}' needs at least one secret` });
        }
        if (a.scheme === "hmac-sha256" && !a.header) {
          ctx.addIssue({ code: "custom", path: ["header"], message: "scheme 'hmac-sha256' needs the header that carries the digest" });
        }
      })
      .openapi("SignalTypeAuth", { example: { scheme: "standard-webhooks", secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"], tolerance_s: 300 } }),
    buffer_ttl_s: z.number().int().min(0).max(31 * 86400).optional().openapi({ description: "0 rejects a signal with no open wait; N keeps it N seconds" }),
    responses: z.array(z.string().min(1).max(100)).min(1).max(20).nullable().optional().openapi({
      description: "Human decisions: the allowed values of the payload's `response` field",
      example: ["approve", "reject"],
    }),
    notify_url: HttpUrlInput().nullable().optional().openapi({
      description: "Receives a signed `signal.waiting` event when a wait for this type opens",
      example: "http://notifier:9100/signals",
    }),
    reminders_s: z.array(z.number().int().min(1).max(365 * 86400)).max(10).optional().openapi({
      description: "Send `signal.reminder` to notify_url this many seconds before a wait's deadline",
      example: [3600],
    }),
    start: z
      .object({ url: HttpUrlInput().openapi({ description: "The engine endpoint that starts runs", example: "http://engine:9000/start" }) })
      .strict()
      .nullable()
      .optional()
      .openapi("SignalTypeStart", {
        description:
          "Signal-with-start: a signal of this type for a run signalbox has never seen (no wait ever opened, no signal ever accepted) is `started`: kept for the run's first wait of that name, and a Standard Webhooks-signed `run.start` event is POSTed to `url`",
      }),
  })
  .strict()
  .openapi("SignalTypeInput");
