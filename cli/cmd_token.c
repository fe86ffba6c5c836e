/* dstream token: API tokens on the database (lib/auth). The operator runs this on
 * the server; no HTTP route creates tokens.
 *
 *   dstream token create --name N --scope S [--scope S ...] [--expires DURATION]
 *   dstream token list
 *   dstream token revoke NAME|ID
 *   dstream token check            (a token on standard input: exit 0 if valid) */
#include <stdio.h>
#include <string.h>

#include "../lib/auth.h"
#include "../lib/timefmt.h"
#include "cli.h"
#include "http.h"

static int usage_token(void) { return cli_usage("token"); }

static int create(log_conn_t *c, int argc, char **argv)
{
    const char *name = NULL, *scopes[AUTH_SCOPES_MAX];
    int nscopes = 0;
    int64_t expires = -1;
    for (int i = 0; i < argc; i++) {
        if (i + 1 >= argc) return usage_token();
        if (!strcmp(argv[i], "--name")) name = argv[++i];
        else if (!strcmp(argv[i], "--scope")) {
            if (nscopes == AUTH_SCOPES_MAX) {
                fprintf(stderr, "dstream: at most %d scopes\n", AUTH_SCOPES_MAX);
                return 2;
            }
            scopes[nscopes++] = argv[++i];
        } else if (!strcmp(argv[i], "--expires")) {
            int64_t d = auth_parse_duration(argv[++i]);
            if (d < 0) {
                fprintf(stderr, "dstream: --expires: a duration like 90s, 15m, 12h or 30d\n");
                return 2;
            }
            expires = timefmt_now_ms() + d;
        } else {
            return usage_token();
        }
    }
    if (!name || !nscopes) return usage_token();
    char tok[AUTH_TOKEN_LEN + 1];
    int rc = auth_token_create(c, name, scopes, nscopes, expires, tok, sizeof tok);
    if (rc == AUTH_ESCOPE) {
        fprintf(stderr, "dstream: a scope is not valid, or the name is not 1 to %d of [A-Za-z0-9_.@-]\n",
                AUTH_NAME_MAX);
        return 2;
    }
    if (rc == AUTH_EEXISTS) {
        fprintf(stderr, "dstream: a token named %s exists (revoke it first)\n", name);
        return 1;
    }
    if (rc) {
        fprintf(stderr, "dstream: cannot create the token: %s\n", errs_str(rc));
        return 1;
    }
    char ts[40] = "never";
    if (expires >= 0) timefmt_format(expires, ts, sizeof ts);
    fprintf(stderr, "token %s created (expires: %s); it is shown once, below:\n", name, ts);
    if (cli_json) {
        json_t *j = json_pack("{s:s, s:s, s:s}", "name", name, "expires", ts, "token", tok);
        print_json(j);
        json_decref(j);
    } else {
        printf("%s\n", tok);
    }
    return 0;
}

static void print_one(void *ud, const auth_t *a, int64_t created_ms)
{
    char scopes[AUTH_SCOPES_MAX * (AUTH_PREFIX_MAX + 20)], cts[40], ets[40] = "never";
    (void)ud;
    auth_scopes_format(a, scopes, sizeof scopes);
    timefmt_format(created_ms, cts, sizeof cts);
    if (a->expires_ms >= 0) timefmt_format(a->expires_ms, ets, sizeof ets);
    if (cli_json) {
        json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:b, s:s}", "name", a->name, "id", a->id, "created", cts,
                              "expires", ets, "expired", a->expires_ms >= 0 && a->expires_ms <= timefmt_now_ms(),
                              "scopes", scopes);
        print_json(j);
        json_decref(j);
        return;
    }
    printf("%-24s %s  created %s  expires %s%s  %s\n", a->name, a->id, cts, ets,
           a->expires_ms >= 0 && a->expires_ms <= timefmt_now_ms() ? " (expired)" : "", scopes);
}

static int check(log_conn_t *c)
{
    char tok[AUTH_TOKEN_LEN + 8];
    if (!fgets(tok, sizeof tok, stdin)) return 1;
    tok[strcspn(tok, "\r\n")] = '\0';
    auth_t a;
    int rc = auth_verify(c, tok, &a);
    if (rc) fprintf(stderr, "dstream: the token is not valid (%s)\n",
                    rc == AUTH_EEXPIRED ? "expired" : rc == AUTH_EINVALID ? "unknown or malformed" : errs_str(rc));
    else fprintf(stderr, "token %s is valid\n", a.name);
    if (cli_json) {
        json_t *j = json_pack("{s:b, s:s?}", "valid", !rc, "name", rc ? NULL : a.name);
        print_json(j);
        json_decref(j);
    }
    return rc ? 1 : 0;
}

int cmd_token(log_t *log, int argc, char **argv)
{
    char err[256];
    if (argc < 1) return usage_token();
    log_conn_t *c = log_conn_open(log, err, sizeof err);
    if (!c) {
        fprintf(stderr, "dstream: %s\n", err);
        return 1;
    }
    int rc;
    if (!strcmp(argv[0], "create")) rc = create(c, argc - 1, argv + 1);
    else if (!strcmp(argv[0], "list") && argc == 1) rc = auth_token_list(c, print_one, NULL) ? 1 : 0;
    else if (!strcmp(argv[0], "revoke") && argc == 2) {
        int lrc = auth_token_revoke(c, argv[1]);
        if (lrc == LOG_ENOTFOUND) fprintf(stderr, "dstream: no token %s\n", argv[1]);
        else if (lrc) fprintf(stderr, "dstream: %s\n", errs_str(lrc));
        else fprintf(stderr, "token %s revoked\n", argv[1]);
        if (!lrc && cli_json) {
            json_t *j = json_pack("{s:s}", "revoked", argv[1]);
            print_json(j);
            json_decref(j);
        }
        rc = lrc ? 1 : 0;
    } else if (!strcmp(argv[0], "check") && argc == 1) rc = check(c);
    else rc = usage_token();
    log_conn_close(c);
    return rc;
}
