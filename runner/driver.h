/* driver: the sessions this runner looks after, driven from their logs (runner/driver.c). */
#ifndef DSTREAM_RUNNER_DRIVER_H
#define DSTREAM_RUNNER_DRIVER_H

#include "types.h"

/* The session id as this process knows it, added (to be looked at) if it is new.
 * The runner owns it until runner_forget. */
sess_t *runner_session(runner_t *R, const char *id);
/* Look at s: hold its lease, read its view from the log and decide (a chat's turn,
 * a workflow's next step, its limits, a cancel). Its events go to the outbox. */
void runner_drive(runner_t *R, sess_t *s);
/* The leases the turn's drives asked for (sess_t.claiming), taken in one
 * transaction; the sessions held are driven again (dirty). Call after the drives. */
void runner_claim(runner_t *R);
/* Drop s and everything it had in flight, and release its lease; s is freed. */
void runner_forget(runner_t *R, sess_t *s);
/* Forget every session, parked ones included (the runner stops). */
void runner_forget_all(runner_t *R);
/* Parked sessions whose timer is at or before now go back on the list, due.
 * Returns the next parked timer (ms), 0 if none is parked. */
int64_t runner_unpark(runner_t *R, int64_t now);
/* The runner stops: every request in flight is cut (restart) and rescheduled, and
 * committed. */
void runner_shutdown(runner_t *R);
/* This process no longer holds s's lease: drop what it had in flight and look
 * again when the other holder's lease may have run out. */
void runner_lost(runner_t *R, sess_t *s);
/* Commit the outbox (outbox_commit) and stop what each session whose events were
 * not written had in flight. Returns 0, or LOG_E* if the transaction failed. */
int runner_commit(runner_t *R);

#endif
