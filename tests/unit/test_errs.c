/* Unit tests for lib/errs.c: every code of every family lies in its family's range,
 * no two codes are equal (SSTORE_EREFUSED, AUTH_EINVALID and SUB_ENOTFOUND's
 * predecessors were all -100 or -101), and errs_str names each one. Includes the
 * families' own headers, as a caller does. */
#include <string.h>

#include "auth.h"
#include "backup.h"
#include "buf.h"
#include "json.h"
#include "log.h"
#include "sstore.h"
#include "subscription.h"
#include "test.h"
#include "workflow.h"

typedef struct code {
    int v;
    int lo, hi;          /* the family's range */
    const char *name;
} code;

#define C(x, lo, hi) {x, lo, hi, #x}

static const code codes[] = {
    C(LOG_ENOTFOUND, -99, -1), C(LOG_ECONFLICT, -99, -1), C(LOG_ECLOSED, -99, -1), C(LOG_ECTYPE, -99, -1),
    C(LOG_ESEQ, -99, -1), C(LOG_EFENCED, -99, -1), C(LOG_EGAP, -99, -1), C(LOG_EBADSEQ, -99, -1),
    C(LOG_EGONE, -99, -1), C(LOG_EINVAL, -99, -1), C(LOG_EEMPTY, -99, -1), C(LOG_ERANGE, -99, -1),
    C(LOG_EBUSY, -99, -1), C(LOG_EIO, -99, -1), C(LOG_ESRCGONE, -99, -1), C(LOG_EOFFSET, -99, -1),
    C(LOG_EFULL, -99, -1), C(LOG_EDOWN, -99, -1),
    C(AUTH_EINVALID, -199, -100), C(AUTH_EEXPIRED, -199, -100), C(AUTH_EEXISTS, -199, -100),
    C(AUTH_ESCOPE, -199, -100),
    C(SSTORE_EREFUSED, -299, -200),
    C(SUB_ENOTFOUND, -399, -300), C(SUB_EEXISTS, -399, -300), C(SUB_EINVAL, -399, -300),
    C(SUB_ETOKEN, -399, -300), C(SUB_EEXPIRED, -399, -300), C(SUB_EFENCED, -399, -300),
    C(SUB_ECLAIMED, -399, -300), C(SUB_ENOWORK, -399, -300), C(SUB_EOFFSET, -399, -300),
    C(SUB_EKIND, -399, -300),
    C(BUF_ENOMEM, -499, -400), C(BUF_ETOOBIG, -499, -400),
    C(JSON_EINVAL, -599, -500), C(JSON_EDEPTH, -599, -500),
    C(WORKFLOW_ETOOLARGE, -699, -600),
    C(BACKUP_EFAIL, -799, -700), C(BACKUP_ENODB, -799, -700), C(BACKUP_EOPEN, -799, -700),
    C(ERRS_CALLBACK, -900, -900),
};

#define N (sizeof codes / sizeof codes[0])

static void test_ranges_and_distinct(void)
{
    for (size_t i = 0; i < N; i++) {
        if (!CHECK(codes[i].v >= codes[i].lo && codes[i].v <= codes[i].hi))
            fprintf(stderr, "  %s = %d is outside %d..%d\n", codes[i].name, codes[i].v, codes[i].lo, codes[i].hi);
        for (size_t j = i + 1; j < N; j++)
            if (!CHECK(codes[i].v != codes[j].v))
                fprintf(stderr, "  %s and %s are both %d\n", codes[i].name, codes[j].name, codes[i].v);
    }
}

static void test_names(void)
{
    for (size_t i = 0; i < N; i++) {
        const char *s = errs_str(codes[i].v);
        if (!CHECK(s && *s && strcmp(s, "unknown error") != 0)) fprintf(stderr, "  %s has no name\n", codes[i].name);
    }
    CHECK_EQ_STR(errs_str(0), "ok");
    CHECK_EQ_STR(errs_str(LOG_ENOTFOUND), "stream not found");
    CHECK_EQ_STR(errs_str(AUTH_EEXPIRED), "token has expired");
    CHECK_EQ_STR(errs_str(SUB_ENOTFOUND), "subscription not found");
    /* A command's own refusal is named as one; outside every range, unknown. */
    CHECK_EQ_STR(errs_str(SSTORE_EREFUSED - 7), "the session refused the command");
    CHECK_EQ_STR(errs_str(-1000), "unknown error");
    CHECK_EQ_STR(errs_str(-150), "unknown error");
    CHECK_EQ_STR(errs_str(7), "unknown error");
}

int main(void)
{
    test_ranges_and_distinct();
    test_names();
    return TEST_MAIN_END();
}
