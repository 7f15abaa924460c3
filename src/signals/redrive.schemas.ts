import { z } from "@hono/zod-openapi";
import { InstantInput, RunIdSchema, SignalNameSchema } from "../http/openapi.ts";
import { REDRIVABLE_OUTCOMES } from "./redrive-signal.ts";
import { OUTCOMES } from "./signal-outcome.ts";

/** POST /signals/redrive: one signal by id, or every dead letter matching a filter. */
export const RedriveBody = z
  .object({
    signal_id: z.string().min(1).max(100).optional().openapi({ description: "The dead letter to send again", example: "sg_01jb2m3k4n5p6q7r8s9t0v1w2x3y" }),
    filter: z
      .object({
        outcome: z.enum(REDRIVABLE_OUTCOMES).optional().openapi({ description: "Unset: rejected_not_waiting and expired" }),
        signal: SignalNameSchema.optional(),
        run: RunIdSchema.optional(),
        before: InstantInput.optional().openapi({ description: "Only signals received before this instant (RFC 3339)" }),
      })
      .strict()
      .optional()
      .openapi({ description: "Every dead letter matching all of these" }),
  })
  .strict()
  // Exactly one of the two: say so where it is wrong, as every other 400 does.
  .superRefine((b, ctx) => {
    if ((b.signal_id === undefined) === (b.filter === undefined)) ctx.addIssue({ code: "custom", path: [], message: "give either signal_id or filter (exactly one)" });
  })
  .openapi("RedriveRequest", { description: "Exactly one of `signal_id` and `filter`" });

/** The intake answer of a redriven signal that was accepted (or a duplicate). */
export const RedrivenSchema = z
  .object({
    outcome: z.enum(["received", "buffered", "started", "duplicate"]),
    signal_id: z.string().openapi({ description: "The new record (for `duplicate`, the signal accepted earlier with the same idempotency key)" }),
    sequence: z.number().int(),
    wait_id: z.string().nullable(),
    run_id: z.string().openapi({ description: "The run the new attempt was applied to: the dead letter's run, or the newest run of its chain when that run was continued since" }),
    redriven_from: z.string().openapi({ description: "The dead letter sent again" }),
  })
  .openapi("SignalRedriven");

export const RedriveResultSchema = z
  .object({
    redriven: z.number().int().openapi({ description: "Dead letters sent again" }),
    outcomes: z.record(z.string(), z.number().int()).openapi({ description: `How many new attempts had each intake outcome (keys among: ${OUTCOMES.join(", ")})`, example: { received: 3, rejected_not_waiting: 1 } }),
    skipped: z
      .object({
        payload_not_kept: z.number().int().openapi({ description: "Matches whose payload was not kept (over 4,096 bytes, or never parsed)" }),
        already_redriven: z.number().int().openapi({ description: "Matches another request redrove meanwhile" }),
      })
      .openapi({ description: "Matches not sent" }),
    more: z.boolean().openapi({ description: "True when the request stopped at 10,000 with matches left: send it again" }),
  })
  .openapi("RedriveResult");
