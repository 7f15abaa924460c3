ALTER TABLE "signalbox"."runs" ADD COLUMN "is_paused" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "signalbox"."runs" ADD COLUMN "paused_at" timestamp (3) with time zone;--> statement-breakpoint
ALTER TABLE "signalbox"."runs" ADD COLUMN "pause_reason" text;--> statement-breakpoint
ALTER TABLE "signalbox"."runs" ADD COLUMN "paused_by" text;--> statement-breakpoint
ALTER TABLE "signalbox"."runs" ADD COLUMN "pause_observed" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "signalbox"."runs" ADD COLUMN "parent_run_id" text;--> statement-breakpoint
CREATE INDEX "runs_parent" ON "signalbox"."runs" USING btree ("parent_run_id") WHERE "signalbox"."runs"."parent_run_id" is not null;--> statement-breakpoint
ALTER TABLE "signalbox"."runs" ADD CONSTRAINT "runs_not_own_parent" CHECK ("signalbox"."runs"."parent_run_id" is null or "signalbox"."runs"."parent_run_id" <> "signalbox"."runs"."run_id");