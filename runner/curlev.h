/* curlev: the runner's curl multi handle driven by its sockets' events.
 *
 * curl_multi_poll + curl_multi_perform cost O(transfers) every turn of the loop:
 * libcurl 7.88 collects every transfer's socket for poll(), then walks every
 * transfer (and asks the kernel again, with a poll of its own, whether its socket
 * is readable). At 200 streaming sessions that was most of what the loop spent
 * outside the commit. Here libcurl says which sockets it wants watched
 * (CURLMOPT_SOCKETFUNCTION: kept in an epoll set) and when it next needs time
 * (CURLMOPT_TIMERFUNCTION: connect and low-speed timeouts, retries of its own);
 * the loop polls the epoll set's one descriptor beside its own (the wake fd, the
 * signal pipe, the MCP pool's pipes) and curlev_run hands libcurl only the sockets
 * that are ready (curl_multi_socket_action), and its timer when it is due. Every
 * transfer on the multi handle (provider requests, webhook deliveries, OTLP
 * exports) goes through it; finished ones are read with curl_multi_info_read as
 * before. */
#ifndef DSTREAM_RUNNER_CURLEV_H
#define DSTREAM_RUNNER_CURLEV_H

#include <curl/curl.h>
#include <stdint.h>

typedef struct curlev curlev_t;

/* Take over the waiting of multi (its socket and timer callbacks). NULL with err
 * filled when the epoll set cannot be made. Free with curlev_free after
 * curl_multi_cleanup (which still reports the sockets it closes). */
curlev_t *curlev_new(CURLM *multi, char *err, size_t cap);
void curlev_free(curlev_t *ev);

/* The descriptor to poll for input: readable when a socket of libcurl's is ready. */
int curlev_fd(const curlev_t *ev);

/* wait (ms from now), or less if libcurl's timer is due sooner (0: due now). */
int64_t curlev_wait(const curlev_t *ev, int64_t wait);

/* Let libcurl work: the ready sockets (when ready says the descriptor was), then
 * its timer if it is due. Callbacks of the transfers run from here. */
void curlev_run(curlev_t *ev, int ready);

/* Sockets watched now (the tests' and the figures' view). */
unsigned curlev_sockets(const curlev_t *ev);

#endif
