/* wfschema: the JSON-Schema subset of workflow documents (outputSchema: type,
 * properties, required, items, enum). Pure; for lib/workflow, which includes this
 * header, and its callers. */
#ifndef DSTREAM_WFSCHEMA_H
#define DSTREAM_WFSCHEMA_H

#include <jansson.h>
#include <stddef.h>

#include "jcheck.h"

/* Limits shared with lib/workflow's validator. */
#define WF_VALUE_DEPTH 64          /* nesting of schemas and update values */
#define WF_JPATH 512               /* bytes of a JSON path in a message */

/* Validate value against the JSON-Schema subset (type, properties, required, items,
 * enum). Returns 0 or -1 with the first mismatch in err. */
int workflow_check_schema(const json_t *schema, const json_t *value, char *err, size_t errcap);

/* Check that s is a schema of the subset (validation of a stored workflow): each
 * mistake goes into e under path (a JSON path; depth is the nesting so far, 0 at
 * the top, refused past WF_VALUE_DEPTH). */
void wfschema_check_doc(jcheck_errlist *e, const char *path, const json_t *s, int depth);

#endif
