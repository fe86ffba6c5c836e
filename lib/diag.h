/* diag: the daemons' diagnostic lines on standard error, as text or as JSON lines.
 *
 * Text (the default) is what a person reads in a terminal or the journal:
 * "[TIME ]PROGRAM: message". JSON (DSTREAM_LOG_FORMAT=json) is one object a line for
 * a log collector: {"time": RFC 3339, "program", "level", "message"}, the message
 * escaped as a JSON string, so no message can break a line or forge a field. Each
 * line is written with one call, whole, whatever the threads. Secrets never go
 * into a message (the callers' rule; nothing here could tell one). */
#ifndef DSTREAM_DIAG_H
#define DSTREAM_DIAG_H

/* Set the program name (kept, not copied), the format ("text" or "json"; NULL or
 * "" is text) and whether text lines start with the time. Returns 0, or -1 for an
 * unknown format (text is then kept). Call once, before threads start. */
int diag_init(const char *program, const char *format, int text_time);

/* One line at level ("info", "warn", "error"), printf-style. */
void diag(const char *level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
