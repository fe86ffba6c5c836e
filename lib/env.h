/* env: the one reader of the programs' settings (environment variables).
 *
 * One rule for numbers, whichever program reads them: unset or empty means the
 * setting's default; anything else must be a whole decimal integer as strtoll reads
 * it in base 10 (leading blanks and one sign allowed, nothing after the digits, no
 * overflow) within the setting's range, or the setting is refused. A program refuses
 * to start on a refused setting (exit status 2) and names it; it never runs on a
 * value it could not read. README.md, Settings, says so. */
#ifndef DSTREAM_ENV_H
#define DSTREAM_ENV_H

#include <stddef.h>

/* The value of number setting name into *out: def when it is unset or empty (def
 * need not lie in the range), else the value read by the rule above. Returns 0, or
 * -1 with "NAME=VALUE is not a number in [min, max]" in err (*out untouched). */
int env_int(const char *name, long long def, long long min, long long max, long long *out, char *err,
            size_t errlen);

/* env_int for a program's start: a refused value is reported (lib/diag, level
 * error, after diag_init) and the program exits with status 2. */
long long env_num(const char *name, long long def, long long min, long long max);

/* The value of setting name, or def when it is unset or empty. The string is the
 * environment's (or def): not to be freed, valid until the variable changes. */
const char *env_str(const char *name, const char *def);

#endif
