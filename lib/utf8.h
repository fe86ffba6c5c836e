/* utf8: checking text that must be UTF-8, and making it so when it is not.
 *
 * Every JSON text dstream sends is UTF-8 (RFC 8259), and jansson refuses to make a
 * string of other bytes: json_string and json_pack return NULL, which a caller that
 * did not check carried into json_dumps and strlen. Client input is checked where it
 * enters (a stream path at creation, query values); what is already stored (a stream
 * path made before that rule, a header echoed in an error) goes out through
 * utf8_json or buf_json_escape, which put U+FFFD in place of each byte that does not
 * start a well-formed sequence (the "maximal subpart" practice of Unicode ch. 3). */
#ifndef DSTREAM_UTF8_H
#define DSTREAM_UTF8_H

#include <stddef.h>

#include <jansson.h>

/* Length of the well-formed UTF-8 sequence at s[0..len) (1 to 4: no overlong forms,
 * no surrogates, nothing above U+10FFFF), or 0 if s does not start with one (len 0
 * included). */
size_t utf8_seq(const char *s, size_t len);
/* Whitespace as Unicode (and Python's str.isspace, which an API may check a text
 * with) has it: the bytes of the whitespace character that s[0..len) begins with
 * (utf8_space_at) or ends with (utf8_space_end), 0 if none. ASCII space, tab, line
 * feed, vertical tab, form feed, carriage return, U+001C-U+001F, U+0085, U+00A0,
 * U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000. */
size_t utf8_space_at(const char *s, size_t len);
size_t utf8_space_end(const char *s, size_t len);
/* 1 if s[0..len) is all well-formed UTF-8, else 0. */
int utf8_valid(const char *s, size_t len);
/* A new NUL-terminated copy of s[0..len) with U+FFFD for each byte that does not
 * start a well-formed sequence; the caller frees it. NULL only when out of memory. */
char *utf8_lossy(const char *s, size_t len);
/* Make s (NUL-terminated) UTF-8 in place: each byte that does not start a
 * well-formed sequence becomes '?'. For text cut to a byte count (snprintf's %.Ns
 * may cut a character in two) before it goes into JSON. Returns s. */
char *utf8_scrub(char *s);
/* A new JSON string of s (NUL-terminated; NULL gives JSON null): s itself when it is
 * UTF-8, else utf8_lossy's copy. New reference; NULL only when out of memory. */
json_t *utf8_json(const char *s);

#endif
