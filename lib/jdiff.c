/* jdiff: where two JSON values first differ (jdiff.h). */
#include "jdiff.h"

#include <stdlib.h>
#include <string.h>

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* path ends at len again, NUL-terminated. */
static void cut(buf_t *path, size_t len)
{
    path->len = len;
    if (path->p) path->p[len] = '\0';
}

int jdiff_each(const json_t *a, const json_t *b, buf_t *path,
               int (*fn)(void *ud, const char *path, const json_t *da, const json_t *db), void *ud)
{
    size_t at = path->len;
    int rc = 0;
    if (a && b && json_typeof(a) == json_typeof(b) && json_is_object(a)) {
        size_t n = json_object_size(a) + json_object_size(b), k = 0;
        const char **keys = calloc(n ? n : 1, sizeof *keys);
        if (!keys) abort();
        const char *key;
        json_t *v;
        json_object_foreach((json_t *)a, key, v) keys[k++] = key;
        json_object_foreach((json_t *)b, key, v)
            if (!json_object_get(a, key)) keys[k++] = key;
        qsort(keys, k, sizeof *keys, cmp_str);
        for (size_t i = 0; i < k && !rc; i++) {
            if ((rc = buf_printf(path, "%s%s", at ? "." : "", keys[i]))) break;
            rc = jdiff_each(json_object_get(a, keys[i]), json_object_get(b, keys[i]), path, fn, ud);
            cut(path, at);
        }
        free(keys);
        return rc;
    }
    if (a && b && json_typeof(a) == json_typeof(b) && json_is_array(a)) {
        size_t na = json_array_size(a), nb = json_array_size(b);
        for (size_t i = 0; (i < na || i < nb) && !rc; i++) {
            if ((rc = buf_printf(path, "[%zu]", i))) break;
            rc = jdiff_each(json_array_get(a, i), json_array_get(b, i), path, fn, ud);
            cut(path, at);
        }
        return rc;
    }
    if (!a && !b) return 0;
    if (a && b && json_equal((json_t *)a, (json_t *)b)) return 0;
    if ((rc = buf_reserve(path, 1))) return rc;
    path->p[path->len] = '\0';
    return fn(ud, path->p, a, b);
}

/* jdiff_each's callback for jdiff: the first difference, its path kept. */
typedef struct {
    const json_t **da, **db;
    char *path;
} first_t;

static int first(void *ud, const char *path, const json_t *da, const json_t *db)
{
    first_t *f = ud;
    *f->da = da;
    *f->db = db;
    f->path = strdup(path);
    if (!f->path) abort();
    return 1;
}

int jdiff(const json_t *a, const json_t *b, buf_t *path, const json_t **da, const json_t **db)
{
    size_t at = path->len;
    first_t f = {da, db, NULL};
    int rc = jdiff_each(a, b, path, first, &f);
    if (rc == 1) buf_printf(path, "%s", f.path + at);   /* path was restored: the difference's again */
    else if (rc) {                                        /* a path too long: the whole values differ */
        *da = a;
        *db = b;
        rc = !(a && b ? json_equal((json_t *)a, (json_t *)b) : !a && !b);
    }
    free(f.path);
    return rc;
}
