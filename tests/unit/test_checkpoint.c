/* Unit tests for lib/checkpoint.c: what fits each input kind, the verdicts on an
 * answer (open checkpoint, early answer, unknown id, answered twice, wrong kind),
 * and the answer the runner's human step takes. */
#include "checkpoint.h"

#include <stdlib.h>
#include <string.h>

#include "test.h"
#pragma GCC diagnostic ignored "-Wunused-function"   /* test_doc.h's other helpers */
#include "test_doc.h"

#define J(text) test_json(text, 0)

static const char WF[] =
    "{'name': 'w', 'phases': [{'name': 'p', 'terminal': true, 'steps': ["
    " {'kind': 'human', 'id': 'ok', 'input': 'approval', 'prompt': 'OK?'},"
    " {'kind': 'human', 'id': 'pick', 'input': 'choice', 'options': ['a', 'b'], 'prompt': 'Which?'},"
    " {'kind': 'human', 'id': 'say', 'input': 'text', 'prompt': 'Say'},"
    " {'kind': 'update', 'set': {'x': 1}}]}]}";

static void reduce(session_view *v, const char *type, const char *payload, const char *offset)
{
    json_t *ev = json_pack("{s:s, s:o}", "type", type, "payload", J(payload));
    CHECK_EQ_INT(session_reduce(v, ev, offset), 0);
    json_decref(ev);
}

static void test_fits(void)
{
    json_t *wf = J(WF);
    const json_t *ok = checkpoint_step(wf, "ok"), *pick = checkpoint_step(wf, "pick"), *say = checkpoint_step(wf, "say");
    CHECK(ok && pick && say);
    CHECK(checkpoint_step(wf, "nope") == NULL);
    CHECK(checkpoint_step(wf, NULL) == NULL);
    json_t *t = json_true(), *s = json_string("a"), *c = json_string("c"), *n = json_integer(1);
    CHECK(checkpoint_fits(ok, t));
    CHECK(!checkpoint_fits(ok, s));
    CHECK(checkpoint_fits(pick, s));
    CHECK(!checkpoint_fits(pick, c));
    CHECK(!checkpoint_fits(pick, n));
    CHECK(checkpoint_fits(say, c));
    CHECK(!checkpoint_fits(say, t));
    CHECK(!checkpoint_fits(say, NULL));
    json_decref(t);
    json_decref(s);
    json_decref(c);
    json_decref(n);
    json_decref(wf);
}

static void test_decide(void)
{
    json_t *wf = J(WF);
    session_view v;
    session_view_init(&v);
    reduce(&v, "session:created", "{'workflow': 'w', 'version': 1}", NULL);
    const char *cause = "x";
    json_t *yes = json_true(), *a = json_string("a"), *z = json_string("z");
    /* Nothing open: an answer to a step of the workflow is kept early. */
    CHECK_EQ_INT(checkpoint_decide(&v, wf, "pick", a, &cause), CHECKPOINT_OK);
    CHECK(cause == NULL);
    CHECK_EQ_INT(checkpoint_decide(&v, wf, "pick", z, &cause), CHECKPOINT_BAD_RESPONSE);
    CHECK_EQ_INT(checkpoint_decide(&v, wf, "ghost", a, &cause), CHECKPOINT_NOT_REQUESTED);
    CHECK_EQ_INT(checkpoint_decide(&v, NULL, "pick", a, &cause), CHECKPOINT_NOT_REQUESTED);
    /* Open: it answers that request (by its offset). */
    reduce(&v, "input:requested", "{'interactionId': 'ok', 'input': 'approval', 'prompt': 'OK?'}",
           "0000000000000004_0000000000000400");
    CHECK_EQ_INT(checkpoint_decide(&v, wf, "ok", a, &cause), CHECKPOINT_BAD_RESPONSE);
    CHECK_EQ_INT(checkpoint_decide(&v, wf, "ok", yes, &cause), CHECKPOINT_OK);
    CHECK_EQ_STR(cause, "0000000000000004_0000000000000400");
    /* The runner sees no answer until one is recorded. */
    CHECK(checkpoint_answer(&v, checkpoint_step(wf, "ok")) == NULL);
    reduce(&v, "input:received", "{'interactionId': 'ok', 'response': true}", NULL);
    CHECK(json_is_true(checkpoint_answer(&v, checkpoint_step(wf, "ok"))));
    CHECK_EQ_INT(checkpoint_decide(&v, wf, "ok", yes, &cause), CHECKPOINT_ANSWERED);
    /* A recorded answer that does not fit the step is not taken. */
    reduce(&v, "input:received", "{'interactionId': 'say', 'response': 5}", NULL);
    CHECK(checkpoint_answer(&v, checkpoint_step(wf, "say")) == NULL);
    json_decref(yes);
    json_decref(a);
    json_decref(z);
    session_view_free(&v);
    json_decref(wf);
}

/* The checkpoint of docs/workflows.md's example is found and its answers fit. */
static void test_doc_example(void)
{
    json_t *wf = test_doc_json_block("docs/workflows.md");
    const json_t *st = checkpoint_step(wf, "publish-ok");
    CHECK(st != NULL);
    json_t *f = json_false();
    CHECK(checkpoint_fits(st, f));
    json_decref(f);
    json_decref(wf);
}

int main(void)
{
    test_doc_example();
    test_fits();
    test_decide();
    return TEST_MAIN_END();
}
