/* The PostgreSQL engine's sessions (lib/sstore.h): one row per session (its
 * status kept in step with its log by lib/sstore) and the snapshots of its view.
 * Ids compare and sort byte by byte (COLLATE "C"), as SQLite's do, whatever the
 * database's collation. */
#include "pg.h"

#include <endian.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROW_COLS "id, stream, agent, workflow, wf_version, parent, fork_offset, status, " \
                 "created_ms, updated_ms, labels"

static void col(char *dst, size_t cap, const PGresult *r, int row, int i)
{
    const char *t = pg_text_of(r, row, i);
    snprintf(dst, cap, "%s", t ? t : "");
}

static void row_of(const PGresult *r, int i, sstore_row *row)
{
    col(row->id, sizeof row->id, r, i, 0);
    col(row->stream, sizeof row->stream, r, i, 1);
    col(row->agent, sizeof row->agent, r, i, 2);
    col(row->workflow, sizeof row->workflow, r, i, 3);
    row->wf_version = (int)pg_int_of(r, i, 4);
    col(row->parent, sizeof row->parent, r, i, 5);
    col(row->fork_offset, sizeof row->fork_offset, r, i, 6);
    col(row->status, sizeof row->status, r, i, 7);
    row->created_ms = pg_int_of(r, i, 8);
    row->updated_ms = pg_int_of(r, i, 9);
    col(row->labels, sizeof row->labels, r, i, 10);
}

/* An empty text is stored as NULL (no agent, no workflow, no parent). */
static void text_opt(pg_params *p, const char *s)
{
    pg_text(p, s[0] ? s : NULL);
}

static int pg_get(log_conn_t *c, const char *id, sstore_row *row)
{
    int rc;
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, id);
    PGresult *r = pg_run(c, "SELECT " ROW_COLS " FROM sessions WHERE id = $1::text AND deleted = 0", &p, 0, &rc);
    if (!r) return rc;
    rc = PQntuples(r) > 0 ? 0 : LOG_ENOTFOUND;
    if (!rc) row_of(r, 0, row);
    PQclear(r);
    return rc;
}

static int pg_kin_get(log_conn_t *c, const char *id, sstore_row *row, int *deleted)
{
    int rc;
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, id);
    PGresult *r = pg_run(c, "SELECT " ROW_COLS ", deleted FROM sessions WHERE id = $1::text", &p, 0, &rc);
    if (!r) return rc;
    rc = PQntuples(r) > 0 ? 0 : LOG_ENOTFOUND;
    if (!rc) {
        row_of(r, 0, row);
        *deleted = pg_int_of(r, 0, 11) != 0;
    }
    PQclear(r);
    return rc;
}

static int pg_children(log_conn_t *c, const char *id, int max,
                       int (*fn)(void *ud, const sstore_row *row, int deleted), void *ud)
{
    int rc;
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, id);
    pg_int(&p, max);
    PGresult *r = pg_run(c, "SELECT " ROW_COLS ", deleted FROM sessions WHERE parent = $1::text"
                            " ORDER BY created_ms, id COLLATE \"C\" LIMIT $2::bigint", &p, 0, &rc);
    if (!r) return rc;
    for (int i = 0; i < PQntuples(r); i++) {
        sstore_row row;
        row_of(r, i, &row);
        if (fn(ud, &row, pg_int_of(r, i, 11) != 0)) break;
    }
    PQclear(r);
    return 0;
}

/* The filter's labels (a JSON object) must all be in the session's: containment.
 * Read in pages of PG_LIST_PAGE rows, each after the last one's (created_ms, id):
 * a caller with no row limit (one that filters rows itself, by a token's scope) and
 * a callback that stops early never make the whole table one result in memory. */
#define PG_LIST_PAGE 256

static int pg_list(log_conn_t *c, const sstore_filter *f, int64_t before_ms, const char *before_id, int max,
                   int (*fn)(void *ud, const sstore_row *row), void *ud)
{
    char after_id[SSTORE_ID_MAX];
    int rc, left = max;     /* rows still wanted; < 0: no limit */
    snprintf(after_id, sizeof after_id, "%s", before_id);
    for (;;) {
        int page = left >= 0 && left < PG_LIST_PAGE ? left : PG_LIST_PAGE, n, stop = 0;
        if (page == 0) return 0;
        pg_params p;
        pg_params_init(&p);
        text_opt(&p, f->status);
        pg_int(&p, before_ms);
        pg_text(&p, after_id);
        pg_int(&p, page);
        text_opt(&p, f->agent);
        text_opt(&p, f->workflow);
        if (f->has_after) pg_int(&p, f->created_after);
        else pg_null(&p);
        if (f->has_before) pg_int(&p, f->created_before);
        else pg_null(&p);
        text_opt(&p, f->labels);
        PGresult *r = pg_run(c, "SELECT " ROW_COLS " FROM sessions WHERE deleted = 0"
                                " AND ($1::text IS NULL OR status = $1::text)"
                                " AND (created_ms < $2::bigint OR (created_ms = $2::bigint"
                                " AND id COLLATE \"C\" < $3::text))"
                                " AND ($5::text IS NULL OR agent = $5::text) AND ($6::text IS NULL OR workflow = $6::text)"
                                " AND ($7::bigint IS NULL OR created_ms > $7::bigint)"
                                " AND ($8::bigint IS NULL OR created_ms < $8::bigint)"
                                " AND ($9::text IS NULL OR ds_jsonb(labels) @> $9::jsonb)"
                                " ORDER BY created_ms DESC, id COLLATE \"C\" DESC LIMIT $4::bigint", &p, 0, &rc);
        if (!r) return rc;
        n = PQntuples(r);
        for (int i = 0; i < n && !stop; i++) {
            sstore_row row;
            row_of(r, i, &row);
            stop = fn(ud, &row) != 0;
            before_ms = row.created_ms;
            snprintf(after_id, sizeof after_id, "%s", row.id);
        }
        PQclear(r);
        if (stop || n < page) return 0;
        if (left > 0) left -= n;
    }
}

static int pg_unfinished(log_conn_t *c, void (*fn)(void *ud, const char *id), void *ud)
{
    int rc;
    PGresult *r = pg_run(c, "SELECT id FROM sessions WHERE deleted = 0 AND status IN"
                            " ('pending', 'running', 'awaiting_input')", NULL, 0, &rc);
    if (!r) return rc;
    for (int i = 0; i < PQntuples(r); i++) {
        const char *id = pg_text_of(r, i, 0);
        if (id) fn(ud, id);
    }
    PQclear(r);
    return 0;
}

static int pg_insert(log_conn_t *c, const sstore_row *row)
{
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, row->id);
    pg_text(&p, row->stream);
    text_opt(&p, row->agent);
    text_opt(&p, row->workflow);
    if (row->workflow[0]) pg_int(&p, row->wf_version);
    else pg_null(&p);
    text_opt(&p, row->parent);
    text_opt(&p, row->fork_offset);
    pg_text(&p, row->status);
    pg_int(&p, row->created_ms);
    pg_int(&p, row->updated_ms);
    text_opt(&p, row->labels);
    return pg_exec(c, "INSERT INTO sessions (id, stream, agent, workflow, wf_version, parent,"
                      " fork_offset, status, created_ms, updated_ms, labels) VALUES ($1::text, $2::text, $3::text,"
                      " $4::text, $5::bigint, $6::text, $7::text, $8::text, $9::bigint, $10::bigint, $11::text)", &p);
}

static int pg_set_status(log_conn_t *c, const char *id, const char *status, int64_t now_ms)
{
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, status);
    pg_int(&p, now_ms);
    pg_text(&p, id);
    return pg_exec(c, "UPDATE sessions SET status = $1::text, updated_ms = $2::bigint WHERE id = $3::text", &p);
}

static int pg_forget_deleted(log_conn_t *c, const char *id)
{
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, id);
    return pg_exec(c, "DELETE FROM sessions WHERE id = $1::text AND deleted = 1", &p);
}

static int pg_mark_deleted(log_conn_t *c, const char *id, int64_t now_ms)
{
    int rc;
    pg_params p;
    pg_params_init(&p);
    pg_int(&p, now_ms);
    pg_text(&p, id);
    if ((rc = pg_exec(c, "UPDATE sessions SET deleted = 1, updated_ms = $1::bigint WHERE id = $2::text", &p)))
        return rc;
    pg_params_init(&p);
    pg_text(&p, id);
    if ((rc = pg_exec(c, "DELETE FROM snapshots WHERE session = $1::text", &p))) return rc;
    return pg_exec(c, "DELETE FROM otlp_cursors WHERE session = $1::text", &p);
}

static int pg_snapshot_before(log_conn_t *c, const char *id, uint64_t upto, offset_t *at, char **view)
{
    int rc;
    *view = NULL;
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, id);
    /* seq is a bigint: a position past its range asks for the newest. */
    pg_int(&p, upto > INT64_MAX ? INT64_MAX : (int64_t)upto);
    PGresult *r = pg_run(c, "SELECT seq, pos, view FROM snapshots WHERE session = $1::text AND seq <= $2::bigint"
                            " ORDER BY seq DESC LIMIT 1", &p, 0, &rc);
    if (!r) return rc;
    rc = 0;
    if (PQntuples(r) > 0) {
        const char *t = pg_text_of(r, 0, 2);
        at->seq = (uint64_t)pg_int_of(r, 0, 0);
        at->pos = (uint64_t)pg_int_of(r, 0, 1);
        if (t && !(*view = strdup(t))) rc = LOG_EIO;
        else rc = t ? 1 : 0;
    }
    PQclear(r);
    return rc;
}

static int pg_snapshot_put(log_conn_t *c, const char *id, offset_t at, const char *view)
{
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, id);
    pg_int(&p, (int64_t)at.seq);
    pg_int(&p, (int64_t)at.pos);
    pg_text(&p, view);
    return pg_exec(c, "INSERT INTO snapshots (session, seq, pos, view)"
                      " VALUES ($1::text, $2::bigint, $3::bigint, $4::text)"
                      " ON CONFLICT (session, seq) DO UPDATE SET pos = EXCLUDED.pos, view = EXCLUDED.view", &p);
}

/* One statement for them all, from arrays. */
static int pg_snapshot_put_many(log_conn_t *c, const char *const *id, const offset_t *at, const char *const *view,
                                size_t n)
{
    if (n == 1) return pg_snapshot_put(c, id[0], at[0], view[0]);
    const void **elem = malloc(4 * n * sizeof *elem);
    size_t *len = malloc(4 * n * sizeof *len);
    uint64_t *num = malloc(2 * n * sizeof *num);
    char *arr[4] = {NULL, NULL, NULL, NULL};
    int rc = LOG_EIO;
    pg_params p;
    pg_params_init(&p);
    if (!elem || !len || !num) goto out;
    for (size_t i = 0; i < n; i++) {
        num[2 * i] = htobe64(at[i].seq);
        num[2 * i + 1] = htobe64(at[i].pos);
        elem[i] = id[i];
        len[i] = strlen(id[i]);
        elem[n + i] = &num[2 * i];
        len[n + i] = sizeof *num;
        elem[2 * n + i] = &num[2 * i + 1];
        len[2 * n + i] = sizeof *num;
        elem[3 * n + i] = view[i];
        len[3 * n + i] = strlen(view[i]);
    }
    for (int a = 0; a < 4; a++)
        if (!(arr[a] = pg_array(&p, a == 0 || a == 3 ? PG_TEXT_OID : PG_INT8_OID, n, elem + a * n, len + a * n)))
            goto out;
    rc = pg_exec(c, "INSERT INTO snapshots (session, seq, pos, view)"
                    " SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[])"
                    " ON CONFLICT (session, seq) DO UPDATE SET pos = EXCLUDED.pos, view = EXCLUDED.view", &p);
out:
    for (int a = 0; a < 4; a++) free(arr[a]);
    free(elem);
    free(len);
    free(num);
    return rc;
}

static int pg_otlp_cursor(log_conn_t *c, const char *id, uint64_t *seq)
{
    int rc;
    *seq = 0;
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, id);
    PGresult *r = pg_run(c, "SELECT seq FROM otlp_cursors WHERE session = $1::text", &p, 0, &rc);
    if (!r) return rc;
    if (PQntuples(r) > 0) *seq = (uint64_t)pg_int_of(r, 0, 0);
    PQclear(r);
    return 0;
}

static int pg_otlp_advance(log_conn_t *c, const char *id, uint64_t from, uint64_t to)
{
    int rc;
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, id);
    pg_int(&p, (int64_t)from);
    pg_int(&p, (int64_t)to);
    /* None kept yet is a cursor at 0. */
    PGresult *r = pg_run(c, "WITH u AS (UPDATE otlp_cursors SET seq = $3::bigint"
                            " WHERE session = $1::text AND seq = $2::bigint RETURNING 1),"
                            " i AS (INSERT INTO otlp_cursors (session, seq) SELECT $1::text, $3::bigint"
                            " WHERE $2::bigint = 0 AND NOT EXISTS (SELECT 1 FROM u)"
                            " ON CONFLICT (session) DO NOTHING RETURNING 1)"
                            " SELECT (SELECT count(*) FROM u) + (SELECT count(*) FROM i)", &p, 0, &rc);
    if (!r) return rc;
    rc = PQntuples(r) > 0 && pg_int_of(r, 0, 0) > 0 ? 1 : 0;
    PQclear(r);
    return rc;
}

static int pg_otlp_behind(log_conn_t *c, int (*fn)(void *ud, const char *id, uint64_t cursor), void *ud)
{
    int rc;
    PGresult *r = pg_run(c, "SELECT s.id, COALESCE(o.seq, 0) FROM sessions s JOIN streams m ON m.path = s.stream"
                            " LEFT JOIN otlp_cursors o ON o.session = s.id"
                            " WHERE s.deleted = 0 AND m.tail_seq > COALESCE(o.seq, 0)", NULL, 0, &rc);
    if (!r) return rc;
    for (int i = 0; i < PQntuples(r); i++) {
        const char *id = pg_text_of(r, i, 0);
        if (id && fn(ud, id, (uint64_t)pg_int_of(r, i, 1))) break;
    }
    PQclear(r);
    return 0;
}

const store_sessions_ops pg_sessions_ops = {
    .get = pg_get,
    .kin_get = pg_kin_get,
    .children = pg_children,
    .list = pg_list,
    .unfinished = pg_unfinished,
    .insert = pg_insert,
    .set_status = pg_set_status,
    .forget_deleted = pg_forget_deleted,
    .mark_deleted = pg_mark_deleted,
    .snapshot_before = pg_snapshot_before,
    .snapshot_put = pg_snapshot_put,
    .snapshot_put_many = pg_snapshot_put_many,
    .otlp_cursor = pg_otlp_cursor,
    .otlp_advance = pg_otlp_advance,
    .otlp_behind = pg_otlp_behind,
};
