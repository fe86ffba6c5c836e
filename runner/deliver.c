/* deliver: subscription wakes and webhook deliveries in the runner (deliver.h). */
#include "deliver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "../lib/diag.h"
#include "../lib/buf.h"
#include "../lib/env.h"
#include "../lib/timefmt.h"
#include "../lib/subscription.h"
#include "../lib/webhook.h"
#include "egress.h"

#define INFLIGHT_MAX 64           /* deliveries in flight at once */
#define CHANGES_MAX 10000         /* changed streams gathered per turn; beyond: a full scan */
#define RESPONSE_MAX 65536        /* bytes of a receiver's answer read */
#define SUBS_NONE_MS 250          /* "no subscription" believed this long without asking again */

typedef struct flight {
    struct flight *next;
    CURL *easy;
    struct curl_slist *headers;
    sub_delivery d;
    buf_t resp;
    egress_t egress;            /* its connection held to the webhook rule */
    char error[200];
    const webhook_allow *allow;
} flight;

struct deliver {
    log_conn_t *conn;
    CURLM *multi;
    webhook_allow *allow;
    int64_t timeout_ms;
    const char *base;
    int started;
    int64_t due;                  /* next time leases or deliveries need a look */
    flight *flying;
    size_t nflying;
    char **changed;
    size_t nchanged;
    int overflow;
    int64_t none_until;           /* none found: changes dropped unasked until then */
    int dropped;                  /* changes dropped since a look found none, or could not look */
};

deliver_t *deliver_new(log_conn_t *conn, CURLM *multi, char *err, size_t cap)
{
    deliver_t *D = calloc(1, sizeof *D);
    if (!D) {
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    D->conn = conn;
    D->multi = multi;
    char why[256];
    if (!(D->allow = webhook_allow_parse(getenv("DSTREAM_WEBHOOK_ALLOW"), why, sizeof why))) {
        snprintf(err, cap, "DSTREAM_WEBHOOK_ALLOW: %s", why);
        free(D);
        return NULL;
    }
    long long v;
    if (env_int("DSTREAM_WEBHOOK_TIMEOUT_MS", 10000, 100, 600000, &v, err, cap)) {
        webhook_allow_free(D->allow);
        free(D);
        return NULL;
    }
    D->timeout_ms = v;
    const char *base = getenv("DSTREAM_PUBLIC_URL");
    D->base = base ? base : "";
    return D;
}

static void flight_free(deliver_t *D, flight *f)
{
    curl_multi_remove_handle(D->multi, f->easy);
    curl_easy_cleanup(f->easy);
    curl_slist_free_all(f->headers);
    sub_delivery_free(&f->d);
    buf_free(&f->resp);
    free(f);
}

void deliver_free(deliver_t *D)
{
    if (!D) return;
    while (D->flying) {
        flight *f = D->flying;
        D->flying = f->next;
        flight_free(D, f);
    }
    for (size_t i = 0; i < D->nchanged; i++) free(D->changed[i]);
    free(D->changed);
    webhook_allow_free(D->allow);
    free(D);
}

int64_t deliver_wait(deliver_t *D, int64_t now, int64_t wait)
{
    if (!D->started) return 0;
    int64_t left = D->due - now;
    /* Changes dropped unasked: the look that asks again is due then. */
    if (D->dropped && D->none_until - now < left) left = D->none_until - now;
    return left < wait ? (left < 0 ? 0 : left) : wait;
}

/* Every socket is checked by the address it is about to connect to. */
/* The operator's webhook rule (DSTREAM_WEBHOOK_ALLOW) for f's connections. */
static int webhook_rule(void *ud, const url_addr *addr, char *why, size_t cap)
{
    flight *f = ud;
    url_t u;
    return url_parse(f->d.url, &u, why, cap) == 0 && webhook_addr_allowed(f->allow, u.host, addr, why, cap);
}

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    flight *f = ud;
    buf_append(&f->resp, p, size * n);   /* beyond its ceiling: ignored */
    return size * n;
}

static void start(deliver_t *D, const sub_delivery *d)
{
    flight *f = calloc(1, sizeof *f);
    if (!f) abort();
    f->d = *d;
    f->allow = D->allow;
    buf_init(&f->resp, RESPONSE_MAX);
    char why[256], sig[WEBHOOK_SIG_MAX + 32];
    if (!webhook_url_allowed(D->allow, d->url, why, sizeof why)) {
        /* The operator narrowed the list since the subscription was made. */
        sub_delivered(D->conn, &f->d, 0, 0, why, timefmt_now_ms());
        diag("info", "subscription %s: webhook refused: %s", d->id, why);
        sub_delivery_free(&f->d);
        buf_free(&f->resp);
        free(f);
        return;
    }
    snprintf(sig, sizeof sig, "Webhook-Signature: %s", d->signature);
    f->headers = curl_slist_append(NULL, "Content-Type: application/json");
    f->headers = curl_slist_append(f->headers, sig);
    f->headers = curl_slist_append(f->headers, "Expect:");
    CURL *e = f->easy = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, d->url);
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, f->d.body);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)f->d.len);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, f->headers);
    egress_setup(e, &f->egress, webhook_rule, f);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)D->timeout_ms);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "dstream-webhook");
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, f);
    curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
    curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
    curl_multi_add_handle(D->multi, e);
    f->next = D->flying;
    D->flying = f;
    D->nflying++;
}

int deliver_finished(deliver_t *D, CURLMsg *msg)
{
    flight **pp = &D->flying, *f;
    while ((f = *pp) && f->easy != msg->easy_handle) pp = &f->next;
    if (!f) return 0;
    *pp = f->next;
    D->nflying--;
    long status = 0;
    curl_easy_getinfo(f->easy, CURLINFO_RESPONSE_CODE, &status);
    int ok = msg->data.result == CURLE_OK && status >= 200 && status < 300, isdone = 0;
    if (ok) {
        json_t *j = f->resp.len ? json_loadb(f->resp.p, f->resp.len, 0, NULL) : NULL;
        isdone = json_is_true(json_object_get(j, "done"));
        json_decref(j);
    } else if (f->egress.refused) {
        snprintf(f->error, sizeof f->error, "%s", f->egress.error);
    } else {
        if (msg->data.result != CURLE_OK) snprintf(f->error, sizeof f->error, "%s", curl_easy_strerror(msg->data.result));
        else snprintf(f->error, sizeof f->error, "HTTP %ld%s", status, status >= 300 && status < 400 ? " (redirects are not followed)" : "");
    }
    int rc = sub_delivered(D->conn, &f->d, ok, isdone, f->error, timefmt_now_ms());
    if (!ok) diag("info", "subscription %s: webhook delivery failed: %s", f->d.id, f->error);
    if (rc) diag("info", "subscription %s: recording the delivery: %s", f->d.id, errs_str(rc));
    flight_free(D, f);
    D->due = 0;   /* a new wake may be due now */
    return 1;
}

void deliver_note(deliver_t *D, const char *path)
{
    if (!path) return;
    if (D->nchanged == CHANGES_MAX) {
        D->overflow = 1;
        return;
    }
    if (!D->changed && !(D->changed = calloc(CHANGES_MAX, sizeof *D->changed))) abort();
    D->changed[D->nchanged++] = strdup(path);
}

/* Forget the streams noted. */
static void notes_drop(deliver_t *D)
{
    for (size_t i = 0; i < D->nchanged; i++) free(D->changed[i]);
    D->nchanged = 0;
    D->overflow = 0;
}

void deliver_tick(deliver_t *D)
{
    int64_t now = timefmt_now_ms();
    int rc = 0;
    if (!D->started) {
        notes_drop(D);          /* the recovery looks at every subscription */
        if ((rc = sub_recover(D->conn))) {
            diag("info", "subscriptions: recovery: %s", errs_str(rc));
            return;
        }
        D->started = 1;
        D->due = 0;
    } else if (D->nchanged || D->overflow || (D->dropped && now >= D->none_until)) {
        /* Without a subscription to match them against (the usual case, and a turn
         * of a busy runner changes hundreds of streams), they are dropped; once none
         * was found, for SUBS_NONE_MS without asking again (a statement every turn
         * otherwise), and the first look that finds one then looks at them all (a
         * subscription made meanwhile may have missed what was dropped). */
        int any = now < D->none_until ? 0 : sub_any(D->conn);
        if (any > 0) {
            if (D->overflow || D->dropped) rc = sub_recover(D->conn);
            else rc = sub_changed(D->conn, D->changed, D->nchanged);
            if (!rc) D->due = 0;
            if (rc) diag("info", "subscriptions: changed streams: %s", errs_str(rc));
        } else if (any < 0) {
            rc = any;
            diag("info", "subscriptions: cannot read them: %s", errs_str(rc));
        }
        if (now < D->none_until) {
            D->dropped = 1;     /* unasked */
        } else if (rc) {
            /* Dropped too: the look after SUBS_NONE_MS looks at them all. */
            D->dropped = 1;
            D->none_until = now + SUBS_NONE_MS;
        } else {
            D->dropped = 0;
            if (!any) D->none_until = now + SUBS_NONE_MS;     /* (none to have missed them) */
        }
        notes_drop(D);
    }
    if (now < D->due) return;
    if ((rc = sub_expire(D->conn, now))) diag("info", "subscriptions: leases: %s", errs_str(rc));
    if (D->nflying < INFLIGHT_MAX) {
        sub_delivery take[INFLIGHT_MAX];
        int n = sub_deliveries_take(D->conn, now, D->timeout_ms + 1000, D->base, take, INFLIGHT_MAX - D->nflying);
        if (n < 0) diag("info", "subscriptions: deliveries: %s", errs_str(n));
        for (int i = 0; i < n; i++) start(D, &take[i]);
    }
    D->due = sub_next_due(D->conn);
    if (rc || D->due < now) D->due = now + 100;
}
