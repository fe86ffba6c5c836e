/* test.h: the unit tests' whole framework.
 *
 * Each check counts a pass or a failure; a failure prints its file:line and the
 * expression (with both values, for the _EQ forms) to stderr and the test goes
 * on, so one run shows every broken check. A test file ends main with
 *
 *     return TEST_MAIN_END();
 *
 * which prints the one line "N passed, N failed" that tests/run-unit.sh sums,
 * and returns non-zero if anything failed. Everything here is static so that a
 * test may include this header once per binary and nothing else. */
#ifndef DSTREAM_TEST_H
#define DSTREAM_TEST_H

#include <ftw.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static unsigned test_passed, test_failed;

/* 1 when malloc is glibc's own: AddressSanitizer and ThreadSanitizer put theirs in
 * its place, whose memory malloc_trim and mallinfo2 neither give back nor count,
 * so a check of how much glibc keeps or gives back means nothing under them. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TEST_GLIBC_MALLOC 0
#else
#define TEST_GLIBC_MALLOC 1
#endif

/* Record one check. Returns ok so that a test can stop early on a failure that
 * would make the checks after it meaningless (if (!CHECK(p)) return;). */
static inline int test_note(int ok, const char *file, int line, const char *expr)
{
    if (ok) {
        test_passed++;
    } else {
        test_failed++;
        fprintf(stderr, "%s:%d: FAIL: %s\n", file, line, expr);
    }
    return ok;
}

static inline int test_eq_int(intmax_t a, intmax_t b, const char *file, int line,
                              const char *ea, const char *eb)
{
    if (a == b) return test_note(1, file, line, NULL);
    test_failed++;
    fprintf(stderr, "%s:%d: FAIL: %s == %s (%jd != %jd)\n", file, line, ea, eb, a, b);
    return 0;
}

static inline int test_eq_uint(uintmax_t a, uintmax_t b, const char *file, int line,
                               const char *ea, const char *eb)
{
    if (a == b) return test_note(1, file, line, NULL);
    test_failed++;
    fprintf(stderr, "%s:%d: FAIL: %s == %s (%ju != %ju)\n", file, line, ea, eb, a, b);
    return 0;
}

static inline int test_eq_str(const char *a, const char *b, const char *file, int line,
                              const char *ea, const char *eb)
{
    if (a && b && strcmp(a, b) == 0) return test_note(1, file, line, NULL);
    test_failed++;
    fprintf(stderr, "%s:%d: FAIL: %s == %s (\"%s\" != \"%s\")\n", file, line, ea, eb,
            a ? a : "(null)", b ? b : "(null)");
    return 0;
}

/* Print a byte string readably: printable ASCII as is, the rest as \xNN. */
static inline void test_dump(const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) {
        if (s[i] >= 0x20 && s[i] < 0x7f && s[i] != '\\') fputc(s[i], stderr);
        else fprintf(stderr, "\\x%02x", s[i]);
    }
}

static inline int test_eq_mem(const void *a, size_t na, const void *b, size_t nb,
                              const char *file, int line, const char *ea, const char *eb)
{
    if (na == nb && (na == 0 || memcmp(a, b, na) == 0)) return test_note(1, file, line, NULL);
    test_failed++;
    fprintf(stderr, "%s:%d: FAIL: %s == %s (\"", file, line, ea, eb);
    test_dump(a, na);
    fprintf(stderr, "\" [%zu] != \"", na);
    test_dump(b, nb);
    fprintf(stderr, "\" [%zu])\n", nb);
    return 0;
}

#define CHECK(cond) test_note(!!(cond), __FILE__, __LINE__, #cond)
#define CHECK_EQ_INT(a, b) test_eq_int((intmax_t)(a), (intmax_t)(b), __FILE__, __LINE__, #a, #b)
#define CHECK_EQ_UINT(a, b) \
    test_eq_uint((uintmax_t)(a), (uintmax_t)(b), __FILE__, __LINE__, #a, #b)
#define CHECK_EQ_STR(a, b) test_eq_str((a), (b), __FILE__, __LINE__, #a, #b)
/* Compare two byte strings given as (pointer, length) pairs. */
#define CHECK_MEM(a, na, b, nb) test_eq_mem((a), (na), (b), (nb), __FILE__, __LINE__, #a, #b)

/* Make a fresh directory for a test's files ($TMPDIR or /tmp) into out.
 * Returns 0, or -1 after printing why. */
static inline int test_mkdtemp(char *out, size_t cap, const char *name)
{
    const char *tmp = getenv("TMPDIR");
    int n = snprintf(out, cap, "%s/dstream-%s.XXXXXX", tmp && *tmp ? tmp : "/tmp", name);
    if (n < 0 || (size_t)n >= cap || !mkdtemp(out)) {
        perror("test_mkdtemp");
        return -1;
    }
    return 0;
}

static inline int test_rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    return remove(p);
}

/* Remove a directory made by test_mkdtemp and everything in it. */
static inline void test_rmtree(const char *dir)
{
    if (nftw(dir, test_rm_one, 16, FTW_DEPTH | FTW_PHYS) != 0)
        fprintf(stderr, "test_rmtree %s: could not remove everything\n", dir);
}

/* Print "N passed, N failed" on stdout; the exit status for main. */
static inline int test_main_end(void)
{
    printf("%u passed, %u failed\n", test_passed, test_failed);
    fflush(stdout);
    return test_failed ? 1 : 0;
}
#define TEST_MAIN_END() test_main_end()

#endif
