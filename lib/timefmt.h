/* timefmt: RFC 3339 timestamps (Stream-Expires-At, event createdAt) and HTTP dates
 * (Retry-After). */
#ifndef DSTREAM_TIMEFMT_H
#define DSTREAM_TIMEFMT_H

#include <stddef.h>
#include <stdint.h>

/* Parse an RFC 3339 date-time ("2025-01-02T03:04:05.678Z", "...+02:00") into
 * milliseconds since the epoch. Returns 0, or -1 if s is not one. */
int timefmt_parse(const char *s, int64_t *ms);

/* Format ms as "YYYY-MM-DDTHH:MM:SS.mmmZ" into out (at least 25 bytes). */
void timefmt_format(int64_t ms, char *out, size_t cap);

/* Parse an IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT", RFC 9110 section 5.6.7;
 * trailing blanks allowed) into milliseconds since the epoch. Returns 0, or -1 if s
 * is not one (another format, a day the month does not have, 24:00). */
int timefmt_http_date(const char *s, int64_t *ms);

/* Milliseconds since the epoch (CLOCK_REALTIME): the clock of every timestamp
 * dstream stores. */
long long timefmt_now_ms(void);

#endif
