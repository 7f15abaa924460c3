CREATE TABLE "signalbox"."link_uses" (
	"link_id" text PRIMARY KEY NOT NULL,
	"wait_id" text NOT NULL,
	"used_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "signalbox"."notifications" (
	"id" text PRIMARY KEY NOT NULL,
	"wait_id" text NOT NULL,
	"type" text NOT NULL,
	"url" text NOT NULL,
	"status" text DEFAULT 'pending' NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"last_error" text,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "notifications_status" CHECK ("signalbox"."notifications"."status" in ('pending', 'delivered', 'failed', 'skipped'))
);
--> statement-breakpoint
CREATE TABLE "signalbox"."votes" (
	"wait_id" text NOT NULL,
	"responder" text NOT NULL,
	"response" text NOT NULL,
	"signal_id" text NOT NULL,
	"voted_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "votes_wait_id_responder_pk" PRIMARY KEY("wait_id","responder")
);
--> statement-breakpoint
ALTER TABLE "signalbox"."signal_types" ADD COLUMN "notify_url" text;--> statement-breakpoint
ALTER TABLE "signalbox"."signal_types" ADD COLUMN "reminders_s" jsonb DEFAULT '[]'::jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "signalbox"."waits" ADD COLUMN "kind" text DEFAULT 'external' NOT NULL;--> statement-breakpoint
ALTER TABLE "signalbox"."waits" ADD COLUMN "source" jsonb;--> statement-breakpoint
ALTER TABLE "signalbox"."waits" ADD COLUMN "fires_at" timestamp (3) with time zone;--> statement-breakpoint
ALTER TABLE "signalbox"."waits" ADD COLUMN "sensor_polls" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "signalbox"."waits" ADD COLUMN "parent_wait_id" text;--> statement-breakpoint
ALTER TABLE "signalbox"."waits" ADD COLUMN "quorum" jsonb;--> statement-breakpoint
ALTER TABLE "signalbox"."waits" ADD COLUMN "votes" jsonb;--> statement-breakpoint
CREATE INDEX "notifications_wait" ON "signalbox"."notifications" USING btree ("wait_id");--> statement-breakpoint
CREATE INDEX "waits_parent" ON "signalbox"."waits" USING btree ("parent_wait_id") WHERE "signalbox"."waits"."parent_wait_id" is not null;--> statement-breakpoint
ALTER TABLE "signalbox"."waits" ADD CONSTRAINT "waits_kind" CHECK ("signalbox"."waits"."kind" in ('external', 'timer', 'sensor', 'all', 'any'));