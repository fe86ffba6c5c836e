/* wfexpr: the expression language of workflow documents: dotted state paths,
 * "{{path}}" templates and conditions (their syntax: lib/workflow.h). Pure; for
 * lib/workflow, which includes this header, and its callers. */
#ifndef DSTREAM_WFEXPR_H
#define DSTREAM_WFEXPR_H

#include <jansson.h>
#include <stddef.h>

#include "buf.h"

/* Render template tpl with {{path}} references resolved against state and input
 * (either may be NULL). Appends to out. Returns 0, or -1 with a message in err
 * (unknown path, unterminated "{{", bad path syntax, output over out's ceiling). */
int workflow_render(const char *tpl, const json_t *state, const json_t *input, buf_t *out,
                    char *err, size_t errcap);

/* Evaluate condition expr. Returns 1 true, 0 false, -1 syntax error (err set).
 * Missing paths evaluate to null; they are not errors. */
int workflow_eval(const char *expr, const json_t *state, const json_t *input, char *err,
                  size_t errcap);

/* Check a condition's syntax without evaluating it. 0 or -1 with err. */
int workflow_check_condition(const char *expr, char *err, size_t errcap);

/* Set a dotted path in obj (an object) to value (reference stolen), creating
 * intermediate objects. Returns 0, or -1 if a non-object is in the way or the path
 * is malformed (value is then released). */
int workflow_set_path(json_t *obj, const char *path, json_t *value);

/* Get a dotted path ("a.b.c") from obj; borrowed reference or NULL. */
json_t *workflow_get_path(const json_t *obj, const char *path);

/* Render tpl into out, or with out NULL only check its syntax (the validator's
 * use: no state exists yet, so paths are not resolved). All or nothing: on failure
 * out is restored to its length on entry. Returns 0, -1 with err, or -2 when out's
 * ceiling stopped it (err set too). */
int wfexpr_template(const char *tpl, const json_t *state, const json_t *input, buf_t *out, char *err,
                    size_t errcap);

/* 1 if s[0..n) is a dotted state path: segments of [A-Za-z0-9_-], single dots
 * between, no dot at either end, at most WF_PATH_MAX bytes. */
int wfexpr_path_ok(const char *s, size_t n);

/* Compare two JSON numbers as conditions do (two integers exactly, else as
 * doubles): <0, 0 or >0. */
int wfexpr_num_cmp(const json_t *a, const json_t *b);

#endif
