-- Runner lease identity (issue 11): a lease names the runner id that holds it
-- (owner, DSTREAM_RUNNER_ID) and the process (instance, a nonce chosen at each
-- start). A runner appends to a session only while its own instance holds the
-- lease, checked in the append's transaction (lib/lease, runner/outbox.c).
ALTER TABLE leases ADD COLUMN instance TEXT NOT NULL DEFAULT '';
