/* Unit tests for lib/opfile: which of the operator's files are read, and what is
 * said about the ones that are not. */
#include "opfile.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"

static char dir[] = "/tmp/test_opfile.XXXXXX", path[64], err[1024];

/* Write text to path with mode, then load it forbidding forbidden. */
static json_t *load(const char *text, mode_t mode, mode_t forbidden, mode_t *got)
{
    FILE *f = fopen(path, "w");
    if (!f) return NULL;
    fputs(text, f);
    fclose(f);
    chmod(path, mode);
    err[0] = '\0';
    return opfile_load(path, forbidden, "must not be writable by others (chmod go-w)", got, err, sizeof err);
}

static void test_accepted(void)
{
    mode_t mode = 0;
    json_t *j = load("{\"a\": 1}", 0644, S_IWGRP | S_IWOTH, &mode);
    CHECK(json_is_object(j) && json_integer_value(json_object_get(j, "a")) == 1);
    CHECK_EQ_INT(mode & 0777, 0644);
    json_decref(j);
    j = load("{}", 0600, 077, NULL);
    CHECK(json_is_object(j));
    json_decref(j);
}

static void test_refused(void)
{
    /* The forbidden bits, with the caller's words. */
    CHECK(load("{}", 0664, S_IWGRP | S_IWOTH, NULL) == NULL);
    CHECK(strstr(err, path) == err && strstr(err, "must not be writable by others (chmod go-w)"));
    CHECK(load("{}", 0604, 077, NULL) == NULL);
    /* Not an object, not JSON, a key twice: said with the path, never the content. */
    CHECK(load("[\"secret-in-array\"]", 0600, 077, NULL) == NULL);
    CHECK(strstr(err, "must be a JSON object") && !strstr(err, "secret"));
    CHECK(load("{\"k\": \"secret-value\"", 0600, 077, NULL) == NULL);
    CHECK(strstr(err, path) == err && !strstr(err, "secret-value"));
    CHECK(load("{\"k\": 1, \"k\": 2}", 0600, 077, NULL) == NULL);
    CHECK(strstr(err, "duplicate") != NULL);
    /* Not a regular file; missing. */
    CHECK(opfile_load(dir, 0, "", NULL, err, sizeof err) == NULL);
    CHECK(strstr(err, "is not a regular file") != NULL);
    char missing[96];
    snprintf(missing, sizeof missing, "%s/none.json", dir);
    CHECK(opfile_load(missing, 0, "", NULL, err, sizeof err) == NULL);
    CHECK(strstr(err, "cannot read") == err);
    /* Another user's file (only root can make one here). */
    if (geteuid() == 0) {
        json_decref(load("{}", 0644, 022, NULL));
        CHECK(chown(path, 4242, (gid_t)-1) == 0);
        CHECK(opfile_load(path, 022, "", NULL, err, sizeof err) == NULL);
        CHECK(strstr(err, "is owned by another user") != NULL);
    }
}

int main(void)
{
    if (!mkdtemp(dir)) return 1;
    snprintf(path, sizeof path, "%s/conf.json", dir);
    test_accepted();
    test_refused();
    unlink(path);
    rmdir(dir);
    return TEST_MAIN_END();
}
