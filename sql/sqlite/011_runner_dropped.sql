-- Events a runner had for a session whose lease it had lost by the time it committed
-- them (paused, cut off, too slow): dropped, never written (runner/outbox.c). Since
-- the runner process started, like the other counters of the row.
ALTER TABLE runner_stats ADD COLUMN dropped INTEGER NOT NULL DEFAULT 0;
