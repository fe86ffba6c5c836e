/* tap: recording and playback of a session's provider requests, tool calls and MCP
 * tool lists (runner/tap.c; lib/recorder, docs/recording.md). */
#ifndef DSTREAM_RUNNER_TAP_H
#define DSTREAM_RUNNER_TAP_H

#include "types.h"

/* DSTREAM_RECORDING and DSTREAM_RECORDING_TIMING. Returns 0, or -1 after saying why. */
int tap_config(runner_t *R);
/* 1 if s records or plays back its requests (its mode is not live). */
int tap_records(runner_t *R, sess_t *s);
/* Decide q's recording mode before it goes out (and set its tap unless it is
 * live): 0 it goes live (recorded or not), 1 a recording answers it (it must not go
 * out), -1 it fails (playback miss: the reason in R->start_error and
 * R->start_reason). Queues recording:request. */
int tap_start(runner_t *R, sess_t *s, rq_t *q);
/* A tool call (its tool:called payload) is about to run: 0 run it (recorded if the
 * mode records), 1 it is answered (*result, a new reference, *is_error, *failed):
 * from a recording, or failed by a playback miss. Queues recording:request. */
int tap_tool_start(runner_t *R, sess_t *s, const json_t *call, json_t **result, int *is_error, int *failed);
/* Its result came: recorded if tap_tool_start recorded it. */
void tap_tool_done(runner_t *R, sess_t *s, const json_t *call, const json_t *result, int is_error, int failed);
/* An MCP server's tools for s, as rmcp_tools answers (RMCP_*): in playback from the
 * latest recording of the server's list (the server is not started; asked only if
 * no list was ever recorded); in record and hybrid modes from the server, each list
 * the session has not recorded yet recorded. */
int tap_tools(runner_t *R, sess_t *s, const char *server, const json_t **tools, char *err, size_t errcap);
/* The loop: the wait before the next playback chunk is due, and feeding them; a
 * request whose recorded answer has been fed whole ends with finished(R, q, result). */
int64_t tap_wait(runner_t *R, int64_t now, int64_t wait);
void tap_pump(runner_t *R, void (*finished)(runner_t *R, rq_t *q, CURLcode result));

#endif
