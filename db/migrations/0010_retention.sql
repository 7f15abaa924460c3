ALTER TABLE "signalbox"."signals" DROP CONSTRAINT "signals_accepted_have_sequence";--> statement-breakpoint
CREATE INDEX "events_wait" ON "signalbox"."events" USING btree ("wait_id") WHERE "signalbox"."events"."wait_id" is not null;--> statement-breakpoint
CREATE INDEX "events_without_wait_occurred" ON "signalbox"."events" USING btree ("occurred_at") WHERE "signalbox"."events"."wait_id" is null;--> statement-breakpoint
CREATE INDEX "link_uses_wait" ON "signalbox"."link_uses" USING btree ("wait_id");--> statement-breakpoint
CREATE INDEX "notifications_created" ON "signalbox"."notifications" USING btree ("created_at");--> statement-breakpoint
CREATE INDEX "signals_wait" ON "signalbox"."signals" USING btree ("wait_id") WHERE "signalbox"."signals"."wait_id" is not null;--> statement-breakpoint
CREATE INDEX "signals_without_wait_received" ON "signalbox"."signals" USING btree ("received_at") WHERE "signalbox"."signals"."wait_id" is null;--> statement-breakpoint
CREATE INDEX "signals_buffer_expiry" ON "signalbox"."signals" USING btree ("buffer_expires_at") WHERE "signalbox"."signals"."outcome" = 'buffered' and "signalbox"."signals"."wait_id" is null;--> statement-breakpoint
CREATE INDEX "waits_resolved" ON "signalbox"."waits" USING btree ("resolved_at") WHERE "signalbox"."waits"."status" <> 'waiting';--> statement-breakpoint
ALTER TABLE "signalbox"."signals" ADD CONSTRAINT "signals_accepted_have_sequence" CHECK (("signalbox"."signals"."outcome" in ('received', 'buffered', 'expired')) = ("signalbox"."signals"."sequence" is not null));