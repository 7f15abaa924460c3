-- A round counter per delivery (each redelivery begins one), so an attempt in flight when a
-- redelivery began is known as an earlier round's when its answer is recorded: it no longer fails
-- the new round, whose callback the redelivery promised (signalbox.sent_in_earlier_round).
-- A constant default: no table rewrite.
ALTER TABLE "signalbox"."run_starts" ADD COLUMN "delivery_round" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "signalbox"."waits" ADD COLUMN "delivery_round" integer DEFAULT 0 NOT NULL;