/* sfilter: session labels and the filters that choose sessions (the list's query,
 * the bulk operations' documents: docs/agents.md, "Labels and bulk operations").
 *
 * Labels are a small JSON object of strings a session is given at its creation:
 * at most SFILTER_LABELS keys of 1 to SFILTER_KEY_MAX bytes of [A-Za-z0-9_./-], each
 * value 0 to SFILTER_VALUE_MAX bytes of [A-Za-z0-9_./:@+-]. The character sets keep
 * the query form unambiguous ("key:value" pairs joined by commas: the key ends at
 * the first colon, no value holds a comma) and the stored form small (at most
 * about 2 KiB, within SSTORE_LABELS_MAX). Nothing here touches the database: it
 * fills an sstore_filter, which the engines turn into their query. */
#ifndef DSTREAM_SFILTER_H
#define DSTREAM_SFILTER_H

#include <jansson.h>
#include <stddef.h>

#include "sstore.h"

#define SFILTER_LABELS 16       /* labels of one session; pairs of one filter */
#define SFILTER_KEY_MAX 63      /* bytes of a label's key */
#define SFILTER_VALUE_MAX 63    /* bytes of a label's value */
#define SFILTER_NAME_MAX 71     /* bytes of an agent's or workflow's name in a filter */

/* Check labels (a JSON object of strings, by the rules above) and write its stored
 * form into out (compact, keys sorted; "" when it has none). 0, or -1 with the
 * mistake in err (one sentence naming the key). */
int sfilter_labels(const json_t *labels, char *out, size_t cap, char *err, size_t errcap);

/* Add the pairs of text ("key:value[,key:value...]", the query form) to f's labels.
 * 0, or -1 with the mistake in err (f's labels then unchanged). */
int sfilter_add_labels(sstore_filter *f, const char *text, char *err, size_t errcap);

/* A creation time of a filter: an RFC 3339 date-time or whole milliseconds since
 * the epoch (>= 0), as text (s) into *ms. 0, or -1 if it is neither. */
int sfilter_time(const char *s, int64_t *ms);

/* Fill f (zeroed first) from a filter document {"status", "agent", "workflow",
 * "labels": {...}, "createdBefore", "createdAfter"} (times: as sfilter_time, or a
 * JSON integer of milliseconds); every key optional, any other refused. 0, or -1
 * with the mistake in err. */
int sfilter_from_json(const json_t *doc, sstore_filter *f, char *err, size_t errcap);

/* 1 if f takes every session (no field given). */
int sfilter_empty(const sstore_filter *f);

#endif
