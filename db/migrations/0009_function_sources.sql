CREATE TABLE "signalbox"."function_sources" (
	"file" text PRIMARY KEY NOT NULL,
	"sha256" text NOT NULL,
	"applied_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
