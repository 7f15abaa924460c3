import { z } from "@hono/zod-openapi";
import { InstantInput as Instant, MetadataInput, SignalNameSchema } from "../http/openapi.ts";
import { cronProblem, isTimeZone } from "./kinds/timer-spec.ts";

export const TimerSpecSchema = z
  .union([
    z.object({ delay_s: z.number().min(0).max(10 * 365 * 86400) }).strict(),
    z.object({ at: Instant }).strict(),
    z
      .object({ cron: z.string().min(1).max(200), timezone: z.string().max(100).optional() })
      .strict()
      .superRefine((t, ctx) => {
        if (t.timezone !== undefined && !isTimeZone(t.timezone)) ctx.addIssue({ code: "custom", path: ["timezone"], message: `unknown time zone '${t.timezone}'` });
        else {
          const problem = cronProblem(t.cron, t.timezone);
          if (problem) ctx.addIssue({ code: "custom", path: ["cron"], message: problem });
        }
      }),
  ])
  .openapi("TimerSpec", {
    description: "Received at that time with payload `{fired_at}`: after `delay_s`, `at` an instant, or at the next `cron` time in `timezone` (IANA, default UTC)",
    example: { cron: "0 9 * * 1-5", timezone: "America/New_York" },
  });

export const SensorSpecSchema = z
  .object({
    url: z.string().url().max(2000),
    method: z.enum(["GET", "HEAD", "POST"]).optional(),
    expect_status: z.number().int().min(100).max(599).optional(),
    pointer: z.string().max(200).regex(/^(\/([^~/]|~[01])*)*$/, "must be a JSON Pointer").optional(),
    equals: z.unknown().optional(),
    interval_s: z.number().min(1).max(86400).optional(),
    max_polls: z.number().int().min(1).max(10000).optional(),
  })
  .strict()
  .openapi("SensorSpec", {
    description: "signalbox polls `url` every `interval_s` (default 60, ±10% jitter); the first response with `expect_status` (default 200) whose value at `pointer` equals `equals` is the payload; after `max_polls` (default 10) misses the wait times out",
    example: { url: "https://warehouse.example.com/tables/orders/freshness", pointer: "/ready", equals: true, interval_s: 300, max_polls: 24 },
  });

export const QuorumSchema = z
  .object({ count: z.number().int().min(1).max(100), veto: z.array(z.string().min(1).max(100)).max(20).optional() })
  .strict()
  .openapi("Quorum", { description: "Received when `count` distinct responders gave the same response, or at once on a `veto` response", example: { count: 2, veto: ["reject"] } });

const sources = (b: { timer?: unknown; sensor?: unknown; all?: unknown; any?: unknown }) => [b.timer, b.sensor, b.all, b.any].filter((v) => v !== undefined).length;

/** A member of a composite wait: an external signal, a timer or a sensor, with its own timeout. */
export const MemberSpecSchema = z
  .object({
    signal: SignalNameSchema,
    timeout_s: z.number().min(0).max(10 * 365 * 86400).optional(),
    timeout_at: Instant.optional(),
    metadata: MetadataInput.optional(),
    timer: TimerSpecSchema.optional(),
    sensor: SensorSpecSchema.optional(),
  })
  .strict()
  .refine((b) => sources(b) <= 1, { message: "give at most one of timer, sensor", path: ["timer"] })
  .refine((b) => b.timeout_s === undefined || b.timeout_at === undefined, { message: "give timeout_s or timeout_at, not both", path: ["timeout_at"] })
  .openapi("MemberWaitSpec");

export const Members = z.array(MemberSpecSchema).min(1).max(20);
export { Instant, sources };
