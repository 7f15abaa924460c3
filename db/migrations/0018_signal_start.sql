CREATE TABLE "signalbox"."run_starts" (
	"run_id" text PRIMARY KEY NOT NULL,
	"signal_id" text NOT NULL,
	"signal" text NOT NULL,
	"url" text NOT NULL,
	"event_id" bigint NOT NULL,
	"occurred_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"delivery_status" text DEFAULT 'pending' NOT NULL,
	"delivery_attempts" integer DEFAULT 0 NOT NULL,
	"delivery_last_error" text,
	"delivery_round_start" integer DEFAULT 0 NOT NULL,
	CONSTRAINT "run_starts_delivery_status" CHECK ("signalbox"."run_starts"."delivery_status" in ('pending', 'delivered', 'failed'))
);
--> statement-breakpoint
ALTER TABLE "signalbox"."events" DROP CONSTRAINT "events_type";--> statement-breakpoint
ALTER TABLE "signalbox"."signals" DROP CONSTRAINT "signals_accepted_have_sequence";--> statement-breakpoint
ALTER TABLE "signalbox"."signals" DROP CONSTRAINT "signals_outcome";--> statement-breakpoint
DROP INDEX "signalbox"."signals_buffered_open";--> statement-breakpoint
ALTER TABLE "signalbox"."delivery_attempts" ALTER COLUMN "wait_id" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "signalbox"."delivery_attempts" ADD COLUMN "start_run_id" text;--> statement-breakpoint
ALTER TABLE "signalbox"."signal_types" ADD COLUMN "start_url" text;--> statement-breakpoint
ALTER TABLE "signalbox"."run_starts" ADD CONSTRAINT "run_starts_run_id_runs_run_id_fk" FOREIGN KEY ("run_id") REFERENCES "signalbox"."runs"("run_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "run_starts_occurred" ON "signalbox"."run_starts" USING btree ("occurred_at");--> statement-breakpoint
CREATE UNIQUE INDEX "delivery_attempts_start_attempt" ON "signalbox"."delivery_attempts" USING btree ("start_run_id","attempt") WHERE "signalbox"."delivery_attempts"."start_run_id" is not null;--> statement-breakpoint
CREATE INDEX "signals_kept_open" ON "signalbox"."signals" USING btree ("run_id","signal","sequence") WHERE "signalbox"."signals"."outcome" in ('buffered', 'started') and "signalbox"."signals"."wait_id" is null;--> statement-breakpoint
ALTER TABLE "signalbox"."delivery_attempts" ADD CONSTRAINT "delivery_attempts_one_owner" CHECK (("signalbox"."delivery_attempts"."wait_id" is null) <> ("signalbox"."delivery_attempts"."start_run_id" is null));--> statement-breakpoint
ALTER TABLE "signalbox"."events" ADD CONSTRAINT "events_type" CHECK ("signalbox"."events"."type" in ('signal.waiting', 'signal.received', 'signal.buffered', 'signal.timeout', 'signal.cancelled', 'signal.vote', 'run.started', 'run.pausing', 'run.paused', 'run.resumed', 'run.cancelling', 'run.cancelled', 'run.continued', 'run.continued_from'));--> statement-breakpoint
ALTER TABLE "signalbox"."signals" ADD CONSTRAINT "signals_accepted_have_sequence" CHECK (("signalbox"."signals"."outcome" in ('received', 'buffered', 'started', 'expired')) = ("signalbox"."signals"."sequence" is not null));--> statement-breakpoint
ALTER TABLE "signalbox"."signals" ADD CONSTRAINT "signals_outcome" CHECK ("signalbox"."signals"."outcome" in ('received', 'buffered', 'started', 'expired', 'rejected_idempotency_conflict', 'rejected_unauthenticated', 'rejected_unknown_signal', 'rejected_not_waiting', 'rejected_not_active', 'rejected_invalid_payload', 'payload_too_large', 'invalid_json'));