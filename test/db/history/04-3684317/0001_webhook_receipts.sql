CREATE TABLE "signalbox"."webhook_receipts" (
	"signal_type" text NOT NULL,
	"webhook_id" text NOT NULL,
	"run_id" text NOT NULL,
	"expires_at" timestamp (3) with time zone NOT NULL,
	CONSTRAINT "webhook_receipts_signal_type_webhook_id_pk" PRIMARY KEY("signal_type","webhook_id")
);
--> statement-breakpoint
CREATE INDEX "webhook_receipts_expires" ON "signalbox"."webhook_receipts" USING btree ("expires_at");