/* Unit tests for lib/provevent.c: the tool-call slots (opened up to the ceiling,
 * delivered whole with their arguments checked, ids and names without NULs, held
 * only while calls are open), the text events and the token counts. */
#include "provevent.h"
#include "provider.h"

#include <stdlib.h>
#include <string.h>

#include "test.h"

typedef struct seen {
    int n;
    pev_kind kind;
    char args[64], id[16];
} seen;

static int on_event(void *ud, const provider_event *ev)
{
    seen *s = ud;
    s->n++;
    s->kind = ev->kind;
    if (ev->kind == PEV_TOOL_CALL) {
        snprintf(s->args, sizeof s->args, "%s", ev->args);
        snprintf(s->id, sizeof s->id, "%s", ev->id);
    }
    return 0;
}

static void test_slots(void)
{
    seen s = {0};
    provider_parser p = {.fn = on_event, .ud = &s};
    for (int i = 0; i < PROVIDER_TOOLS_OPEN_MAX; i++) CHECK(pev_slot_open(&p, i) != NULL);
    CHECK(pev_slot_open(&p, PROVIDER_TOOLS_OPEN_MAX) == NULL);   /* one too many */
    CHECK(pev_slot_open(&p, 3) == pev_slot_find(&p, 3));        /* open already */
    CHECK(pev_slot_find(&p, 1000) == NULL);

    /* Arguments in pieces make one call; none at all are "{}". */
    json_t *id = json_string("c1");
    tool_slot *t = pev_slot_find(&p, 0);
    CHECK_EQ_INT(pev_slot_set(&t->id, id), 0);
    buf_puts(&t->args, " {\"a\":");
    buf_puts(&t->args, "1}");
    CHECK_EQ_INT(pev_slot_close(&p, 0), 0);
    CHECK_EQ_INT(s.n, 1);
    CHECK_EQ_INT(s.kind, PEV_TOOL_CALL);
    CHECK_EQ_STR(s.args, "{\"a\":1}");
    CHECK_EQ_STR(s.id, "c1");
    CHECK_EQ_UINT(p.ntools, PROVIDER_TOOLS_OPEN_MAX - 1);
    CHECK_EQ_INT(pev_slot_close(&p, 0), 0);
    CHECK_EQ_STR(s.args, "{}");

    /* Arguments that are not JSON, or an id with a NUL, make the stream malformed. */
    t = &p.tools[0];
    buf_puts(&t->args, "{\"a\":");
    CHECK_EQ_INT(pev_slot_close(&p, 0), -1);
    json_t *nul = json_stringn("c\0d", 3);
    CHECK_EQ_INT(pev_slot_set(&p.tools[0].id, nul), 0);
    CHECK_EQ_INT(pev_slot_close(&p, 0), -1);
    size_t before = p.ntools;
    CHECK_EQ_INT(pev_slots_flush(&p), 0);
    CHECK_EQ_UINT(p.ntools, 0);
    CHECK_EQ_INT(s.n, 2 + (int)before);
    json_decref(nul);
    json_decref(id);
    free(p.tools);
}

/* A parser is one per provider request in flight: it holds no room for tool calls
 * until one opens (it held 64 slots, 7 KiB, whatever the reply). */
static void test_slots_memory(void)
{
    CHECK(sizeof(provider_parser) < 512);
    provider_parser *p = provider_parser_new(PROVIDER_ANTHROPIC, NULL, NULL);
    if (!CHECK(p != NULL)) return;
    CHECK(p->tools == NULL && p->captools == 0);
    CHECK(pev_slot_open(p, 7) != NULL);
    CHECK_EQ_UINT(p->captools, 1);
    for (int i = 0; i < 5; i++) CHECK(pev_slot_open(p, 100 + i) != NULL);
    CHECK_EQ_UINT(p->ntools, 6);
    CHECK(p->captools >= 6 && p->captools <= 8);
    CHECK(pev_slot_find(p, 7) == &p->tools[0]);     /* the first stays first */
    provider_parser_free(p);                        /* slots and all (ASan: no leak) */
}

static void test_text_and_tokens(void)
{
    seen s = {0};
    provider_parser p = {.fn = on_event, .ud = &s};
    json_t *empty = json_string(""), *hi = json_string("hi"), *n = json_integer(-5), *o = json_object();
    CHECK_EQ_INT(pev_text(&p, PEV_TEXT, empty), 0);
    CHECK_EQ_INT(pev_text(&p, PEV_TEXT, NULL), 0);
    CHECK_EQ_INT(s.n, 0);
    CHECK_EQ_INT(pev_text(&p, PEV_THINKING, hi), 0);
    CHECK_EQ_INT(s.n, 1);
    CHECK_EQ_INT(s.kind, PEV_THINKING);
    int found = 0;
    json_object_set(o, "neg", n);
    json_object_set_new(o, "ok", json_integer(12));
    CHECK_EQ_INT(pev_tokens(o, "missing", &found), 0);
    CHECK_EQ_INT(found, 0);
    CHECK_EQ_INT(pev_tokens(o, "neg", &found), 0);
    CHECK_EQ_INT(found, 1);
    CHECK_EQ_INT(pev_tokens(o, "ok", &found), 12);
    CHECK_EQ_INT(pev_done(&p), 0);
    CHECK_EQ_INT(p.done, 1);
    CHECK_EQ_INT(s.kind, PEV_DONE);
    CHECK(pev_is_ws('\r') && !pev_is_ws('x'));
    json_decref(o);
    json_decref(n);
    json_decref(hi);
    json_decref(empty);
}

int main(void)
{
    test_slots();
    test_slots_memory();
    test_text_and_tokens();
    return TEST_MAIN_END();
}
