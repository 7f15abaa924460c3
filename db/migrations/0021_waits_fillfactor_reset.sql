-- Undoes 0020: with 30 % of each page kept free, opening a wait cost Postgres twice the CPU
-- (npm run bench: 0.55 -> 1.12 ms a wait, 1,597 -> 1,007 waits/s), far more than the HOT
-- updates it bought a timeout's delivery record. Pages packed full again from here on.
ALTER TABLE "signalbox"."waits" RESET (fillfactor);
