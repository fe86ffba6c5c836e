#include "env.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "diag.h"

int env_int(const char *name, long long def, long long min, long long max, long long *out, char *err,
            size_t errlen)
{
    const char *v = getenv(name);
    if (!v || !*v) {
        *out = def;
        return 0;
    }
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (errno || end == v || *end || n < min || n > max) {
        snprintf(err, errlen, "%s=%s is not a number in [%lld, %lld]", name, v, min, max);
        return -1;
    }
    *out = n;
    return 0;
}

long long env_num(const char *name, long long def, long long min, long long max)
{
    char err[256];
    long long n;
    if (env_int(name, def, min, max, &n, err, sizeof err)) {
        diag("error", "%s", err);
        exit(2);
    }
    return n;
}

const char *env_str(const char *name, const char *def)
{
    const char *v = getenv(name);
    return v && *v ? v : def;
}
