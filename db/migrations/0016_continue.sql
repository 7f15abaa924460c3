ALTER TABLE "signalbox"."events" DROP CONSTRAINT "events_type";--> statement-breakpoint
ALTER TABLE "signalbox"."runs" DROP CONSTRAINT "runs_status";--> statement-breakpoint
ALTER TABLE "signalbox"."runs" ADD COLUMN "continued_as" text;--> statement-breakpoint
ALTER TABLE "signalbox"."runs" ADD COLUMN "continued_at" timestamp (3) with time zone;--> statement-breakpoint
ALTER TABLE "signalbox"."runs" ADD CONSTRAINT "runs_continued_as_runs_run_id_fk" FOREIGN KEY ("continued_as") REFERENCES "signalbox"."runs"("run_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "runs_continued_as" ON "signalbox"."runs" USING btree ("continued_as") WHERE "signalbox"."runs"."continued_as" is not null;--> statement-breakpoint
ALTER TABLE "signalbox"."events" ADD CONSTRAINT "events_type" CHECK ("signalbox"."events"."type" in ('signal.waiting', 'signal.received', 'signal.buffered', 'signal.timeout', 'signal.cancelled', 'signal.vote', 'run.pausing', 'run.paused', 'run.resumed', 'run.cancelling', 'run.cancelled', 'run.continued', 'run.continued_from'));--> statement-breakpoint
ALTER TABLE "signalbox"."runs" ADD CONSTRAINT "runs_continued" CHECK (("signalbox"."runs"."status" = 'continued') = ("signalbox"."runs"."continued_as" is not null) and ("signalbox"."runs"."continued_as" is null) = ("signalbox"."runs"."continued_at" is null));--> statement-breakpoint
ALTER TABLE "signalbox"."runs" ADD CONSTRAINT "runs_not_own_successor" CHECK ("signalbox"."runs"."continued_as" is null or "signalbox"."runs"."continued_as" <> "signalbox"."runs"."run_id");--> statement-breakpoint
ALTER TABLE "signalbox"."runs" ADD CONSTRAINT "runs_status" CHECK ("signalbox"."runs"."status" in ('active', 'cancelled', 'continued'));