ALTER TABLE "signalbox"."signals" ADD COLUMN "reply" jsonb;--> statement-breakpoint
ALTER TABLE "signalbox"."waits" ADD COLUMN "reply" jsonb;--> statement-breakpoint
ALTER TABLE "signalbox"."waits" ADD COLUMN "replied_at" timestamp (3) with time zone;