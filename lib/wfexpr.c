/* wfexpr: the expression language of workflows: dotted state paths, "{{path}}"
 * templates and conditions (lib/workflow.h describes the three).
 *
 * Pure, like all of the workflow: functions read their arguments and write only
 * their out-parameters. Conditions are parsed and evaluated in one pass by a
 * recursive-descent parser whose input length and nesting are bounded (WF_COND_MAX,
 * WF_COND_DEPTH): no expression can exhaust the stack or take more than linear
 * time. */
#include "wfexpr.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jcheck.h"

/* Limits. Beyond them an input is a mistake rather than a resource problem; they
 * bound the parser's work, the recursion depth and the size of error messages. */
#define WF_PATH_MAX 256            /* bytes in a dotted state path */
#define WF_COND_MAX 4096           /* bytes in a condition */
#define WF_COND_DEPTH 64           /* nesting of "(" and "!" in a condition */
#define WF_NUM_MAX 64              /* bytes in a number literal */

enum { ROOT_STATE, ROOT_INPUT };

/* ---- paths ------------------------------------------------------------------- */

/* Path segments leave out '.', which separates them, and everything a condition
 * or a template would need quoted: a path reads the same in all three places. */
static int is_seg_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-';
}

/* A dotted path: segments of [A-Za-z0-9_-], single dots between, no dot at
 * either end, at most WF_PATH_MAX bytes. */
int wfexpr_path_ok(const char *s, size_t n)
{
    if (n == 0 || n > WF_PATH_MAX) return 0;
    int after_dot = 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '.') {
            if (after_dot) return 0;
            after_dot = 1;
        } else if (is_seg_char(c)) {
            after_dot = 0;
        } else {
            return 0;
        }
    }
    return !after_dot;
}

/* Paths descend through objects only. The state is documented as nested objects;
 * an index syntax for arrays would be one more language for users to learn and for
 * the validator to check. Takes a length because references inside templates and
 * conditions are not NUL-terminated. */
static json_t *get_pathn(const json_t *obj, const char *s, size_t n)
{
    if (!wfexpr_path_ok(s, n)) return NULL;
    const json_t *cur = obj;
    size_t i = 0;
    for (;;) {
        size_t j = i;
        while (j < n && s[j] != '.') j++;
        if (!json_is_object(cur)) return NULL;
        cur = json_object_getn(cur, s + i, j - i);
        if (!cur || j == n) return (json_t *)cur;
        i = j + 1;
    }
}

json_t *workflow_get_path(const json_t *obj, const char *path)
{
    if (!path) return NULL;
    return get_pathn(obj, path, strnlen(path, WF_PATH_MAX + 1));
}

int workflow_set_path(json_t *obj, const char *path, json_t *value)
{
    int rc = -1;
    if (!value) return -1;
    if (!json_is_object(obj) || !path) goto out;
    size_t n = strnlen(path, WF_PATH_MAX + 1);
    if (!wfexpr_path_ok(path, n)) goto out;
    /* Nothing is created before every existing segment on the way proved to be
     * an object, so a failure leaves obj untouched: once a segment is missing,
     * all below it are created fresh and cannot be in the way. */
    json_t *cur = obj;
    size_t i = 0;
    for (;;) {
        size_t j = i;
        while (j < n && path[j] != '.') j++;
        if (j == n) {
            rc = json_object_setn_new(cur, path + i, j - i, value);
            value = NULL;   /* jansson took it, even on failure */
            goto out;
        }
        json_t *next = json_object_getn(cur, path + i, j - i);
        if (!next) {
            next = json_object();
            if (!next || json_object_setn_new(cur, path + i, j - i, next)) goto out;
        } else if (!json_is_object(next)) {
            goto out;
        }
        cur = next;
        i = j + 1;
    }
out:
    json_decref(value);
    return rc ? -1 : 0;
}

/* Split a reference ("state", "input", "state.a.b") into its root and the path
 * after it (rest NULL for a bare root). Returns 0, -1 for bad syntax, -2 for a
 * well-formed path under an unknown root. */
static int ref_split(const char *s, size_t n, int *root, const char **rest, size_t *restn)
{
    size_t r = 0;
    while (r < n && s[r] != '.') r++;
    if (r == 5 && memcmp(s, "state", 5) == 0) *root = ROOT_STATE;
    else if (r == 5 && memcmp(s, "input", 5) == 0) *root = ROOT_INPUT;
    else return wfexpr_path_ok(s, n) ? -2 : -1;
    *rest = NULL;
    *restn = 0;
    if (r == n) return 0;
    *rest = s + r + 1;
    *restn = n - r - 1;
    return wfexpr_path_ok(*rest, *restn) ? 0 : -1;
}

/* The value a split reference names; a NULL root (no state, no input) has
 * nothing under it, so every path is missing rather than an error. */
static const json_t *ref_get(int root, const char *rest, size_t restn, const json_t *state,
                             const json_t *input)
{
    const json_t *base = root == ROOT_STATE ? state : input;
    if (!base || !rest) return base;
    return get_pathn(base, rest, restn);
}

/* ---- templates ----------------------------------------------------------------- */

/* buf_append, with its codes turned into the message a user will read: -2 when
 * out's ceiling was reached (what subst tells apart), -1 out of memory. */
static int out_append(buf_t *out, const void *p, size_t n, char *err, size_t errcap)
{
    int rc = buf_append(out, p, n);
    if (rc == BUF_ETOOBIG) jcheck_seterr(err, errcap, "rendered text over %zu bytes", out->max);
    else if (rc) jcheck_seterr(err, errcap, "out of memory");
    return rc == BUF_ETOOBIG ? -2 : rc ? -1 : 0;
}

/* A value as template text: strings as they are (prompts want the words, not a
 * JSON literal), anything else compact JSON. 15 significant digits print 0.1 as
 * "0.1" rather than jansson's default 17 digits "0.10000000000000001". */
static int render_value(const json_t *v, buf_t *out, char *err, size_t errcap)
{
    if (json_is_string(v))
        return out_append(out, json_string_value(v), json_string_length(v), err, errcap);
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15));
    if (!s) {
        jcheck_seterr(err, errcap, "cannot encode a value as JSON");
        return -1;
    }
    int rc = out_append(out, s, strlen(s), err, errcap);
    free(s);
    return rc;
}

int wfexpr_template(const char *tpl, const json_t *state, const json_t *input, buf_t *out, char *err,
                    size_t errcap)
{
    char q[JCHECK_QUOTE];
    size_t mark = out ? out->len : 0;
    int rc = -1, arc;
    if (!tpl) {
        jcheck_seterr(err, errcap, "no template");
        return -1;
    }
    const char *p = tpl;
    /* One pass: copy the text up to the next "{{", resolve the reference, go on
     * after its "}}". Linear in the template whatever it holds. */
    for (;;) {
        const char *open = strstr(p, "{{");
        size_t lit = open ? (size_t)(open - p) : strlen(p);
        if (out && (arc = out_append(out, p, lit, err, errcap))) {
            rc = arc;
            goto out;
        }
        if (!open) break;
        const char *close = strstr(open + 2, "}}");
        size_t col = (size_t)(open - tpl) + 1;
        if (!close) {
            jcheck_seterr(err, errcap, "unterminated \"{{\" at column %zu", col);
            goto out;
        }
        /* "{{ state.x }}" reads as well as "{{state.x}}"; allow the spaces. */
        const char *a = open + 2, *b = close;
        while (a < b && (*a == ' ' || *a == '\t')) a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t')) b--;
        size_t n = (size_t)(b - a);
        int root;
        const char *rest;
        size_t restn;
        int sr = ref_split(a, n, &root, &rest, &restn);
        if (sr == -2) {
            jcheck_seterr(err, errcap,
                          "unknown root in {{%s}} at column %zu (paths start with state. or "
                          "input.)",
                          jcheck_show(q, sizeof q, a, n), col);
            goto out;
        }
        if (sr) {
            jcheck_seterr(err, errcap, "bad path {{%s}} at column %zu",
                          jcheck_show(q, sizeof q, a, n), col);
            goto out;
        }
        if (out) {
            const json_t *v = ref_get(root, rest, restn, state, input);
            if (!v) {
                jcheck_seterr(err, errcap, "unknown path %s at column %zu",
                              jcheck_show(q, sizeof q, a, n), col);
                goto out;
            }
            if ((arc = render_value(v, out, err, errcap))) {
                rc = arc;
                goto out;
            }
        }
        p = close + 2;
    }
    rc = 0;
out:
    if (rc && out) {
        out->len = mark;
        if (out->p) out->p[mark] = '\0';
    }
    return rc;
}

int workflow_render(const char *tpl, const json_t *state, const json_t *input, buf_t *out,
                    char *err, size_t errcap)
{
    if (!out) {
        jcheck_seterr(err, errcap, "no output buffer");
        return -1;
    }
    return wfexpr_template(tpl, state, input, out, err, errcap) ? -1 : 0;
}

/* ---- conditions ---------------------------------------------------------------- */

typedef enum { V_NULL, V_BOOL, V_NUM, V_STR, V_JSON } vtype;

/* One value during evaluation. Numbers keep their integer form when they have
 * one, so that large integers compare exactly instead of through a double. */
typedef struct val {
    vtype t;
    int b;              /* V_BOOL */
    int is_int;         /* V_NUM: i holds the value exactly */
    long long i;
    double d;           /* V_NUM: always set */
    const char *s;      /* V_STR: not NUL-terminated */
    size_t n;
    const json_t *j;    /* V_JSON: an object or an array */
} val;

typedef enum { OP_NONE, OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE } cmp_op;

typedef struct cond {
    const char *s;
    size_t len, i;
    int depth;
    const json_t *state, *input;
    /* Unescaped string literals. Each takes no more bytes than its source text,
     * so the input's bound is theirs too. */
    char lits[WF_COND_MAX];
    size_t nlits;
    char *err;
    size_t errcap;
} cond;

static int c_or(cond *c, int ev, val *v);

/* Every parse function clears its result first, so a value parsed but not
 * evaluated (the skipped side of && and ||) is a defined null, never garbage. */
static void val_null(val *v)
{
    memset(v, 0, sizeof *v);
    v->t = V_NULL;
}

static void val_bool(val *v, int b)
{
    val_null(v);
    v->t = V_BOOL;
    v->b = !!b;
}

static void val_json(val *v, const json_t *j)
{
    val_null(v);
    switch (j ? json_typeof(j) : JSON_NULL) {
    case JSON_TRUE: val_bool(v, 1); break;
    case JSON_FALSE: val_bool(v, 0); break;
    case JSON_INTEGER:
        v->t = V_NUM;
        v->is_int = 1;
        v->i = json_integer_value(j);
        v->d = (double)v->i;
        break;
    case JSON_REAL:
        v->t = V_NUM;
        v->d = json_real_value(j);
        break;
    case JSON_STRING:
        v->t = V_STR;
        v->s = json_string_value(j);
        v->n = json_string_length(j);
        break;
    case JSON_OBJECT:
    case JSON_ARRAY:
        v->t = V_JSON;
        v->j = j;
        break;
    default: break;
    }
}

/* The header's rule for a bare value: present and not false/null/0/"". */
static int truthy(const val *v)
{
    switch (v->t) {
    case V_BOOL: return v->b;
    case V_NUM: return v->is_int ? v->i != 0 : v->d != 0;
    case V_STR: return v->n > 0;
    case V_JSON: return 1;
    default: return 0;
    }
}

/* Two integers compare exactly; anything else through doubles. JSON has no NaN,
 * so this ordering is total. */
static int num_cmp(const val *a, const val *b)
{
    if (a->is_int && b->is_int) return (a->i > b->i) - (a->i < b->i);
    return (a->d > b->d) - (a->d < b->d);
}

/* Byte order, like strcmp, but over lengths: jansson strings may contain NULs. */
static int str_cmp(const val *a, const val *b)
{
    size_t n = a->n < b->n ? a->n : b->n;
    int r = n ? memcmp(a->s, b->s, n) : 0;
    if (r) return r < 0 ? -1 : 1;
    return (a->n > b->n) - (a->n < b->n);
}

static int val_equal(const val *a, const val *b)
{
    if (a->t != b->t) return 0;
    switch (a->t) {
    case V_NULL: return 1;
    case V_BOOL: return a->b == b->b;
    case V_NUM: return num_cmp(a, b) == 0;
    case V_STR: return str_cmp(a, b) == 0;
    default: return json_equal(a->j, b->j);
    }
}

/* Different types are never equal, so == is false and != true between them;
 * ordering is defined for two numbers or two strings only. */
static int compare(cmp_op op, const val *a, const val *b)
{
    if (op == OP_EQ) return val_equal(a, b);
    if (op == OP_NE) return !val_equal(a, b);
    int r;
    if (a->t == V_NUM && b->t == V_NUM) r = num_cmp(a, b);
    else if (a->t == V_STR && b->t == V_STR) r = str_cmp(a, b);
    else return 0;
    switch (op) {
    case OP_LT: return r < 0;
    case OP_LE: return r <= 0;
    case OP_GT: return r > 0;
    default: return r >= 0;
    }
}

static int cerr(cond *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int cerr(cond *c, const char *fmt, ...)
{
    if (c->err && c->errcap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, c->errcap, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* Name what sits at the cursor in an error: a printable character or a byte. */
static int c_unexpected(cond *c)
{
    if (c->i >= c->len) return cerr(c, "unexpected end of condition");
    unsigned char ch = (unsigned char)c->s[c->i];
    if (ch > 0x20 && ch < 0x7f) return cerr(c, "unexpected '%c' at column %zu", ch, c->i + 1);
    return cerr(c, "unexpected byte 0x%02x at column %zu", ch, c->i + 1);
}

/* JSON's whitespace, so that a condition written across lines still parses. */
static void c_ws(cond *c)
{
    while (c->i < c->len) {
        char ch = c->s[c->i];
        if (ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r') break;
        c->i++;
    }
}

static int is_digit(char ch)
{
    return ch >= '0' && ch <= '9';
}

/* A "string" literal. The escapes are JSON's without \u: enough for quotes,
 * backslashes and newlines, and no literal can produce invalid UTF-8 or a NUL. */
static int c_string(cond *c, val *v)
{
    size_t start = c->i++;
    char *dst = c->lits + c->nlits;
    size_t n = 0;
    for (;;) {
        if (c->i >= c->len) return cerr(c, "unterminated string at column %zu", start + 1);
        char ch = c->s[c->i];
        if (ch == '"') break;
        if (ch == '\\') {
            if (++c->i >= c->len) return cerr(c, "unterminated string at column %zu", start + 1);
            switch (c->s[c->i]) {
            case '"': ch = '"'; break;
            case '\\': ch = '\\'; break;
            case '/': ch = '/'; break;
            case 'n': ch = '\n'; break;
            case 't': ch = '\t'; break;
            case 'r': ch = '\r'; break;
            default: return cerr(c, "unknown escape at column %zu", c->i);
            }
        }
        /* Cannot trigger (see cond.lits), but a bound is cheaper than a proof. */
        if (c->nlits + n >= sizeof c->lits) return cerr(c, "string literals too long");
        dst[n++] = ch;
        c->i++;
    }
    c->i++;
    c->nlits += n;
    val_null(v);
    v->t = V_STR;
    v->s = dst;
    v->n = n;
    return 0;
}

/* JSON's number syntax, scanned here so that strtod never sees hex, "inf" or
 * "nan"; integers stay integers unless they overflow a long long. */
static int c_number(cond *c, val *v)
{
    size_t start = c->i;
    int is_int = 1;
    if (c->s[c->i] == '-') c->i++;
    if (c->i >= c->len || !is_digit(c->s[c->i]))
        return cerr(c, "expected a digit after '-' at column %zu", start + 1);
    while (c->i < c->len && is_digit(c->s[c->i])) c->i++;
    if (c->i < c->len && c->s[c->i] == '.') {
        is_int = 0;
        if (++c->i >= c->len || !is_digit(c->s[c->i]))
            return cerr(c, "expected a digit after '.' at column %zu", c->i);
        while (c->i < c->len && is_digit(c->s[c->i])) c->i++;
    }
    if (c->i < c->len && (c->s[c->i] == 'e' || c->s[c->i] == 'E')) {
        is_int = 0;
        c->i++;
        if (c->i < c->len && (c->s[c->i] == '+' || c->s[c->i] == '-')) c->i++;
        if (c->i >= c->len || !is_digit(c->s[c->i]))
            return cerr(c, "expected an exponent at column %zu", c->i + 1);
        while (c->i < c->len && is_digit(c->s[c->i])) c->i++;
    }
    size_t n = c->i - start;
    if (n >= WF_NUM_MAX) return cerr(c, "number too long at column %zu", start + 1);
    char tmp[WF_NUM_MAX];
    memcpy(tmp, c->s + start, n);
    tmp[n] = '\0';
    val_null(v);
    v->t = V_NUM;
    char *end;
    if (is_int) {
        errno = 0;
        long long ll = strtoll(tmp, &end, 10);
        if (errno == 0 && *end == '\0') {
            v->is_int = 1;
            v->i = ll;
            v->d = (double)ll;
            return 0;
        }
    }
    /* Underflow to 0 or a denormal is fine; overflow to infinity is not. */
    v->d = strtod(tmp, &end);
    if (*end != '\0' || !isfinite(v->d))
        return cerr(c, "number out of range at column %zu", start + 1);
    return 0;
}

/* true, false, null, or a path under state or input. */
static int c_word(cond *c, int ev, val *v)
{
    size_t start = c->i;
    while (c->i < c->len &&
           (is_seg_char((unsigned char)c->s[c->i]) || c->s[c->i] == '.'))
        c->i++;
    const char *w = c->s + start;
    size_t n = c->i - start;
    char q[JCHECK_QUOTE];
    if (n == 4 && memcmp(w, "true", 4) == 0) { val_bool(v, 1); return 0; }
    if (n == 5 && memcmp(w, "false", 5) == 0) { val_bool(v, 0); return 0; }
    if (n == 4 && memcmp(w, "null", 4) == 0) { val_null(v); return 0; }
    int root;
    const char *rest;
    size_t restn;
    int sr = ref_split(w, n, &root, &rest, &restn);
    if (sr == -2)
        return cerr(c, "unknown name '%s' at column %zu (paths start with state. or input.)",
                    jcheck_show(q, sizeof q, w, n), start + 1);
    if (sr)
        return cerr(c, "bad path '%s' at column %zu", jcheck_show(q, sizeof q, w, n), start + 1);
    /* A missing path is null, not an error: conditions often ask whether a step
     * has written something yet. */
    if (ev) val_json(v, ref_get(root, rest, restn, c->state, c->input));
    else val_null(v);
    return 0;
}

/* One value: a parenthesized expression or a literal or a path. The depth
 * counts '(' and '!' together, since both recurse and the recursion is what the
 * bound protects. */
static int c_primary(cond *c, int ev, val *v)
{
    val_null(v);
    c_ws(c);
    if (c->i >= c->len) return cerr(c, "expected a value at end of condition");
    char ch = c->s[c->i];
    if (ch == '(') {
        size_t at = c->i++;
        if (++c->depth > WF_COND_DEPTH)
            return cerr(c, "nested deeper than %d at column %zu", WF_COND_DEPTH, at + 1);
        if (c_or(c, ev, v)) return -1;
        c_ws(c);
        if (c->i >= c->len || c->s[c->i] != ')')
            return cerr(c, "missing ')' for the '(' at column %zu", at + 1);
        c->i++;
        c->depth--;
        return 0;
    }
    if (ch == '"') return c_string(c, v);
    if (ch == '-' || is_digit(ch)) return c_number(c, v);
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_') return c_word(c, ev, v);
    if (ch == ')') return cerr(c, "unexpected ')' at column %zu", c->i + 1);
    return c_unexpected(c);
}

/* "!" binds tighter than comparisons, as in C and JavaScript. */
static int c_unary(cond *c, int ev, val *v)
{
    c_ws(c);
    if (c->i < c->len && c->s[c->i] == '!' && !(c->i + 1 < c->len && c->s[c->i + 1] == '=')) {
        size_t at = c->i++;
        if (++c->depth > WF_COND_DEPTH)
            return cerr(c, "nested deeper than %d at column %zu", WF_COND_DEPTH, at + 1);
        val x;
        if (c_unary(c, ev, &x)) return -1;
        c->depth--;
        val_bool(v, ev && !truthy(&x));
        return 0;
    }
    return c_primary(c, ev, v);
}

/* Read a comparison operator at the cursor, if any. A lone "=" is a mistake
 * worth naming: it is the most likely typo for "==". */
static int c_op(cond *c, cmp_op *op)
{
    c_ws(c);
    *op = OP_NONE;
    if (c->i >= c->len) return 0;
    char a = c->s[c->i], b = c->i + 1 < c->len ? c->s[c->i + 1] : '\0';
    if (a == '=' && b == '=') *op = OP_EQ;
    else if (a == '!' && b == '=') *op = OP_NE;
    else if (a == '<' && b == '=') *op = OP_LE;
    else if (a == '>' && b == '=') *op = OP_GE;
    else if (a == '<') *op = OP_LT;
    else if (a == '>') *op = OP_GT;
    else if (a == '=') return cerr(c, "'=' at column %zu: compare with ==", c->i + 1);
    else return 0;
    c->i += (*op == OP_LT || *op == OP_GT) ? 1 : 2;
    return 0;
}

/* An operand, optionally compared with one more. The result of a comparison is
 * a boolean; without an operator the operand itself is passed up, so that a
 * bare path keeps its value for the truthiness rule. */
static int c_cmp(cond *c, int ev, val *v)
{
    val l, r;
    cmp_op op, again;
    if (c_unary(c, ev, &l)) return -1;
    if (c_op(c, &op)) return -1;
    if (op == OP_NONE) {
        *v = l;
        return 0;
    }
    if (c_unary(c, ev, &r)) return -1;
    /* "a < b < c" means something else in every language that allows it. */
    c_ws(c);
    size_t at = c->i;
    if (c_op(c, &again)) return -1;
    if (again != OP_NONE)
        return cerr(c, "comparisons do not chain (column %zu): use parentheses", at + 1);
    val_bool(v, ev && compare(op, &l, &r));
    return 0;
}

/* && and || short-circuit: the right side is still parsed, so that its syntax
 * errors surface whatever the state, but it is not evaluated. */
static int c_and(cond *c, int ev, val *v)
{
    if (c_cmp(c, ev, v)) return -1;
    for (;;) {
        c_ws(c);
        if (!(c->i + 1 < c->len && c->s[c->i] == '&' && c->s[c->i + 1] == '&')) return 0;
        c->i += 2;
        int lt = ev && truthy(v);
        val r;
        if (c_cmp(c, lt, &r)) return -1;
        val_bool(v, lt && truthy(&r));
    }
}

static int c_or(cond *c, int ev, val *v)
{
    if (c_and(c, ev, v)) return -1;
    for (;;) {
        c_ws(c);
        if (!(c->i + 1 < c->len && c->s[c->i] == '|' && c->s[c->i + 1] == '|')) return 0;
        c->i += 2;
        int lt = ev && truthy(v);
        val r;
        if (c_and(c, ev && !lt, &r)) return -1;
        val_bool(v, lt || (ev && truthy(&r)));
    }
}

/* Parse expr, evaluating it when ev. Returns 1, 0 or -1 (0 when !ev). */
static int cond_run(const char *expr, const json_t *state, const json_t *input, int ev,
                    char *err, size_t errcap)
{
    if (!expr) {
        jcheck_seterr(err, errcap, "no condition");
        return -1;
    }
    /* strnlen: a huge input costs no more than a legal one before it is refused. */
    size_t len = strnlen(expr, WF_COND_MAX + 1);
    if (len > WF_COND_MAX) {
        jcheck_seterr(err, errcap, "condition longer than %d bytes", WF_COND_MAX);
        return -1;
    }
    cond c;
    c.s = expr;
    c.len = len;
    c.i = 0;
    c.depth = 0;
    c.state = state;
    c.input = input;
    c.nlits = 0;
    c.err = err;
    c.errcap = errcap;
    c_ws(&c);
    if (c.i >= c.len) {
        jcheck_seterr(err, errcap, "empty condition");
        return -1;
    }
    val v;
    if (c_or(&c, ev, &v)) return -1;
    c_ws(&c);
    if (c.i < c.len) return c_unexpected(&c);
    return ev ? truthy(&v) : 0;
}

int workflow_eval(const char *expr, const json_t *state, const json_t *input, char *err,
                  size_t errcap)
{
    return cond_run(expr, state, input, 1, err, errcap);
}

int workflow_check_condition(const char *expr, char *err, size_t errcap)
{
    return cond_run(expr, NULL, NULL, 0, err, errcap) < 0 ? -1 : 0;
}

int wfexpr_num_cmp(const json_t *a, const json_t *b)
{
    val x, y;
    val_json(&x, a);
    val_json(&y, b);
    return num_cmp(&x, &y);
}
