/* workflow: validation, templates, conditions and the decision core.
 *
 * Everything here is pure: functions read their arguments and write only their
 * out-parameters, so that the runner can replay a session's events through
 * workflow_next() and reach the same decisions every time.
 *
 * Documents come from clients, so nothing here trusts them. The validator walks the
 * whole document and names every mistake instead of stopping at the first, because
 * a user fixing a workflow wants the full list in one round trip. Conditions are
 * parsed and evaluated in one pass by a recursive-descent parser whose input length
 * and nesting are bounded (WF_COND_MAX, WF_COND_DEPTH): no expression can exhaust
 * the stack or take more than linear time. workflow_next() never assumes the
 * document was validated either; a broken one yields NEXT_FAIL, not a crash. */
#include "workflow.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "jcheck.h"

/* Limits. Beyond them an input is a mistake rather than a resource problem; they
 * bound the parser's work, the recursion depth and the size of error messages. */
#define WF_PATH_MAX 256            /* bytes in a dotted state path */
#define WF_COND_MAX 4096           /* bytes in a condition */
#define WF_COND_DEPTH 64           /* nesting of "(" and "!" in a condition */
#define WF_NUM_MAX 64              /* bytes in a number literal */
#define WF_VALUE_DEPTH 64          /* nesting of schemas and update values */
#define WF_RENDER_MAX (1u << 20)   /* bytes of one string rendered into state */
#define WF_PHASES_MAX 64
#define WF_STEPS_MAX 64
#define WF_TRANSITIONS_MAX 16
#define WF_OPTIONS_MIN 2
#define WF_OPTIONS_MAX 20
#define WF_TOOL_MAX 128            /* bytes in a tool name */
#define WF_JPATH 512               /* bytes of a JSON path in a message */

/* Which of "$output", "$response" and "$input" a value may use. SUB_ON says the
 * three are special at all: in tool arguments they are plain template text. */
#define SUB_OUTPUT 1u
#define SUB_RESPONSE 2u
#define SUB_INPUT 4u
#define SUB_ON 8u

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
static int path_ok(const char *s, size_t n)
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
    if (!path_ok(s, n)) return NULL;
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
    if (!path_ok(path, n)) goto out;
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
    else return path_ok(s, n) ? -2 : -1;
    *rest = NULL;
    *restn = 0;
    if (r == n) return 0;
    *rest = s + r + 1;
    *restn = n - r - 1;
    return path_ok(*rest, *restn) ? 0 : -1;
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

/* Render tpl into out, or with out NULL only check its syntax (the validator's
 * use: no state exists yet, so paths are not resolved). All or nothing: on
 * failure out is restored to its length on entry. -2 when out's ceiling stopped it. */
static int template_run(const char *tpl, const json_t *state, const json_t *input, buf_t *out,
                        char *err, size_t errcap)
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
    return template_run(tpl, state, input, out, err, errcap) ? -1 : 0;
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

/* ---- JSON-Schema subset ---------------------------------------------------------- */

/* The type names JSON Schema defines; "integer" is the one that is not a
 * jansson type of its own. */
static const char *const schema_types[] = {
    "object", "array", "string", "number", "integer", "boolean", "null", NULL
};

/* Keywords that describe without constraining; accepted and ignored. */
static const char *const schema_notes[] = {
    "description", "title", "$schema", "$id", "default", "examples", NULL
};

/* JSON Schema counts 1.0 as an integer; jansson parses it as a real. */
static int is_integral(const json_t *v)
{
    if (json_is_integer(v)) return 1;
    if (!json_is_real(v)) return 0;
    double d = json_real_value(v);
    if (d >= 9007199254740992.0 || d <= -9007199254740992.0) return 1;
    return (double)(long long)d == d;
}

/* An unknown type name matches nothing: at runtime that reports the mismatch
 * instead of letting every value through (the validator rejects such schemas). */
static int type_matches(const char *t, const json_t *v)
{
    if (strcmp(t, "object") == 0) return json_is_object(v);
    if (strcmp(t, "array") == 0) return json_is_array(v);
    if (strcmp(t, "string") == 0) return json_is_string(v);
    if (strcmp(t, "number") == 0) return json_is_number(v);
    if (strcmp(t, "integer") == 0) return is_integral(v);
    if (strcmp(t, "boolean") == 0) return json_is_boolean(v);
    if (strcmp(t, "null") == 0) return json_is_null(v);
    return 0;
}

/* What a value is, in the words of the schema, for "expected X, got Y". */
static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "number";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    default: return "null";
    }
}

/* Equality for enum: numbers by value (1 equals 1.0), the rest as jansson has it. */
static int enum_equal(const json_t *a, const json_t *b)
{
    if (json_is_number(a) && json_is_number(b)) {
        val x, y;
        val_json(&x, a);
        val_json(&y, b);
        return num_cmp(&x, &y) == 0;
    }
    return json_equal(a, b);
}

/* Append ".key" or "[i]" to the value path at path[len]; returns the new length.
 * Paths only label messages, so a long one is cut, never overflowed. */
static size_t vpath_key(char *path, size_t len, const char *key)
{
    if (len >= WF_JPATH - 1) return len;
    char q[JCHECK_QUOTE];
    int k = snprintf(path + len, WF_JPATH - len, "%s%s", len ? "." : "",
                     jcheck_show(q, sizeof q, key, strlen(key)));
    if (k < 0) return len;
    return (size_t)k < WF_JPATH - len ? len + (size_t)k : WF_JPATH - 1;
}

static size_t vpath_idx(char *path, size_t len, size_t i)
{
    if (len >= WF_JPATH - 1) return len;
    int k = snprintf(path + len, WF_JPATH - len, "[%zu]", i);
    if (k < 0) return len;
    return (size_t)k < WF_JPATH - len ? len + (size_t)k : WF_JPATH - 1;
}

/* Check v against schema; path[0..plen) names v in messages and is extended in
 * place for children (and cut back after each), so the walk needs no allocation.
 * Only the first mismatch is reported: the runner shows it to the model or the
 * user, for whom one concrete problem is more useful than a list. */
static int schema_check(const json_t *schema, const json_t *v, char *path, size_t plen,
                        int depth, char *err, size_t errcap)
{
    const char *at = plen ? path : "$";
    if (depth > WF_VALUE_DEPTH) {
        jcheck_seterr(err, errcap, "%s: schema nested deeper than %d", at, WF_VALUE_DEPTH);
        return -1;
    }
    if (!json_is_object(schema)) {
        jcheck_seterr(err, errcap, "%s: the schema is not an object", at);
        return -1;
    }
    const json_t *type = json_object_get(schema, "type");
    if (json_is_string(type)) {
        if (!type_matches(json_string_value(type), v)) {
            jcheck_seterr(err, errcap, "%s: expected %s, got %s", at, json_string_value(type),
                          type_name(v));
            return -1;
        }
    } else if (json_is_array(type)) {
        size_t i;
        const json_t *t;
        int any = 0;
        json_array_foreach(type, i, t)
            if (json_is_string(t) && type_matches(json_string_value(t), v)) any = 1;
        if (!any) {
            jcheck_seterr(err, errcap, "%s: %s is not one of the allowed types", at, type_name(v));
            return -1;
        }
    }
    const json_t *en = json_object_get(schema, "enum");
    if (json_is_array(en)) {
        size_t i;
        const json_t *e;
        int any = 0;
        json_array_foreach(en, i, e)
            if (enum_equal(e, v)) any = 1;
        if (!any) {
            jcheck_seterr(err, errcap, "%s: not one of the allowed values", at);
            return -1;
        }
    }
    /* As in JSON Schema, properties/required constrain objects only and items
     * arrays only; "type" is what rejects a value of the wrong kind. */
    if (json_is_object(v)) {
        const json_t *req = json_object_get(schema, "required");
        size_t i;
        const json_t *r;
        json_array_foreach(req, i, r) {
            if (json_is_string(r) && !json_object_get(v, json_string_value(r))) {
                char q[JCHECK_QUOTE];
                jcheck_seterr(err, errcap, "%s: missing required property \"%s\"", at,
                              jcheck_show(q, sizeof q, json_string_value(r),
                                          json_string_length(r)));
                return -1;
            }
        }
        const json_t *props = json_object_get(schema, "properties");
        const char *key;
        const json_t *sub;
        json_object_foreach((json_t *)props, key, sub) {
            const json_t *pv = json_object_get(v, key);
            if (!pv) continue;
            size_t n = vpath_key(path, plen, key);
            int rc = schema_check(sub, pv, path, n, depth + 1, err, errcap);
            path[plen] = '\0';
            if (rc) return -1;
        }
    }
    const json_t *items = json_object_get(schema, "items");
    if (json_is_array(v) && items) {
        size_t i;
        const json_t *item;
        json_array_foreach(v, i, item) {
            size_t n = vpath_idx(path, plen, i);
            int rc = schema_check(items, item, path, n, depth + 1, err, errcap);
            path[plen] = '\0';
            if (rc) return -1;
        }
    }
    return 0;
}

int workflow_check_schema(const json_t *schema, const json_t *value, char *err, size_t errcap)
{
    char path[WF_JPATH];
    path[0] = '\0';
    if (!value) {
        jcheck_seterr(err, errcap, "$: no value");
        return -1;
    }
    return schema_check(schema, value, path, 0, 0, err, errcap);
}

/* ---- updates ------------------------------------------------------------------------ */

/* What one update or value may still add, in bytes: the strings it renders and the
 * values it copies in. Checked before each is built, so that a template that names
 * a large value many times ("{{state.big}}" x 48) fails at the limit instead of
 * building all of it. max 0: no limit (but WF_RENDER_MAX per string still holds). */
typedef struct budget {
    size_t max, left;
    int over;               /* the limit stopped it: WORKFLOW_ETOOLARGE */
} budget;

static void over_budget(budget *bud, char *err, size_t errcap)
{
    bud->over = 1;
    jcheck_seterr(err, errcap, "it would take more than %zu bytes (the limit on a workflow's state)", bud->max);
}

/* A new value for v: with SUB_ON, the strings "$output", "$response" and "$input"
 * become copies of those values (JSON null when absent); every other string is
 * rendered as a template against state and input. Whatever it adds is taken from
 * bud. */
static json_t *subst(const json_t *v, unsigned flags, const json_t *output,
                     const json_t *response, const json_t *input, const json_t *state,
                     budget *bud, int depth, char *err, size_t errcap)
{
    json_t *res = NULL;
    /* Values come from stored documents; the bound keeps recursion shallow
     * whatever a client built. */
    if (depth > WF_VALUE_DEPTH) {
        jcheck_seterr(err, errcap, "value nested deeper than %d", WF_VALUE_DEPTH);
        return NULL;
    }
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        const json_t *sub = NULL;
        int special = 0;
        if (flags & SUB_ON) {
            if (strcmp(s, "$output") == 0) special = 1, sub = output;
            else if (strcmp(s, "$response") == 0) special = 1, sub = response;
            else if (strcmp(s, "$input") == 0) special = 1, sub = input;
        }
        if (special) {
            /* Its size as JSON, measured without building the text. */
            size_t n = sub ? json_dumpb(sub, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY) : 4;
            if (bud->max && n > bud->left) {
                over_budget(bud, err, errcap);
                return NULL;
            }
            if (bud->max) bud->left -= n;
            res = sub ? json_deep_copy(sub) : json_null();
            if (!res) jcheck_seterr(err, errcap, "out of memory");
            return res;
        }
        buf_t b;
        size_t cap = bud->max && bud->left < WF_RENDER_MAX ? bud->left : WF_RENDER_MAX;
        buf_init(&b, cap);
        int rc = template_run(s, state, input, &b, err, errcap);
        if (rc == 0) {
            res = json_stringn(b.p ? b.p : "", b.len);
            if (!res) jcheck_seterr(err, errcap, "rendered text is not valid UTF-8");
            else if (bud->max) bud->left -= b.len;
        } else if (rc == -2 && bud->max && cap == bud->left) {
            over_budget(bud, err, errcap);
        }
        buf_free(&b);
        return res;
    }
    /* Containers are rebuilt, never shared with the document: the state must not
     * alias the workflow definition that the runner keeps using. */
    if (json_is_object(v)) {
        res = json_object();
        const char *key;
        const json_t *x;
        json_object_foreach((json_t *)v, key, x) {
            json_t *nx = subst(x, flags, output, response, input, state, bud, depth + 1, err, errcap);
            if (!nx || json_object_set_new(res, key, nx)) goto fail;
        }
        return res;
    }
    if (json_is_array(v)) {
        res = json_array();
        size_t i;
        const json_t *x;
        json_array_foreach(v, i, x) {
            json_t *nx = subst(x, flags, output, response, input, state, bud, depth + 1, err, errcap);
            if (!nx || json_array_append_new(res, nx)) goto fail;
        }
        return res;
    }
    res = json_deep_copy(v);
    if (!res) jcheck_seterr(err, errcap, "out of memory");
    return res;
fail:
    json_decref(res);
    return NULL;
}

int workflow_apply_update(json_t *state, const json_t *update, const json_t *output,
                          const json_t *response, const json_t *input, size_t max, char *err,
                          size_t errcap)
{
    int rc = -1;
    budget bud = {max, max, 0};
    json_t *copy = NULL;
    char msg[WORKFLOW_ERR_MAX], q[JCHECK_QUOTE];
    if (!json_is_object(state)) {
        jcheck_seterr(err, errcap, "state is not an object");
        return -1;
    }
    if (!update) return 0;
    if (!json_is_object(update)) {
        jcheck_seterr(err, errcap, "update is not an object");
        return -1;
    }
    /* Work on a copy and swap it in at the end, so that a failure in the third
     * key leaves the first two unapplied. Templates read the state as it was
     * before the update, whatever the order of the keys. */
    copy = json_deep_copy(state);
    if (!copy) {
        jcheck_seterr(err, errcap, "out of memory");
        return -1;
    }
    const char *key;
    size_t klen;
    const json_t *v;
    /* By the key's real length: one with a NUL inside is not the path before it. */
    json_object_keylen_foreach((json_t *)update, key, klen, v) {
        const char *k = jcheck_show(q, sizeof q, key, klen);
        if (!path_ok(key, klen)) {
            jcheck_seterr(err, errcap, "%s: not a state path", k);
            goto out;
        }
        json_t *nv = subst(v, SUB_ON, output, response, input, state, &bud, 0, msg, sizeof msg);
        if (!nv) {
            jcheck_seterr(err, errcap, "%s: %s", k, msg);
            if (bud.over) rc = WORKFLOW_ETOOLARGE;
            goto out;
        }
        if (workflow_set_path(copy, key, nv)) {
            jcheck_seterr(err, errcap, "%s: a value that is not an object is in the way", k);
            goto out;
        }
    }
    /* The state as a whole, as its state:updated event will carry it. */
    size_t n = max ? json_dumpb(copy, NULL, 0, JSON_COMPACT) : 0;
    if (n > max) {
        jcheck_seterr(err, errcap, "the state would be %zu bytes, more than its limit of %zu", n, max);
        rc = WORKFLOW_ETOOLARGE;
        goto out;
    }
    /* Swap the contents, not the object: the caller's reference stays valid. */
    json_object_clear(state);
    if (json_object_update(state, copy)) {
        jcheck_seterr(err, errcap, "out of memory");
        goto out;
    }
    rc = 0;
out:
    json_decref(copy);
    return rc;
}

int workflow_render_json(const json_t *value, const json_t *state, const json_t *input, size_t max,
                         json_t **out, char *err, size_t errcap)
{
    budget bud = {max, max, 0};
    *out = NULL;
    if (!value) {
        jcheck_seterr(err, errcap, "no value");
        return -1;
    }
    *out = subst(value, 0, NULL, NULL, input, state, &bud, 0, err, errcap);
    return *out ? 0 : bud.over ? WORKFLOW_ETOOLARGE : -1;
}

/* ---- validation -------------------------------------------------------------------- */

typedef struct vctx {
    jcheck_errlist *e;
    const json_t *phases;   /* the phases array, when it is one */
    json_t *ids;            /* human step ids seen: id -> where */
} vctx;

/* The string at obj.key, or NULL after naming the mistake (see jcheck_string). */
static const char *get_string(jcheck_errlist *e, const char *base, const json_t *obj,
                              const char *key, int required)
{
    return json_string_value(jcheck_string(e, base, obj, key, required));
}

/* Names share agent_valid_name's alphabet: they appear in URLs and event payloads. */
static void check_name(jcheck_errlist *e, const char *base, const json_t *obj, const char *key,
                       int required)
{
    char path[WF_JPATH];
    const char *s = get_string(e, base, obj, key, required);
    jcheck_key(path, sizeof path, base, key);
    if (s && !agent_valid_name(s)) jcheck_mistake(e, path, "must be 1 to 64 of A-Z a-z 0-9 _ . -");
}

/* Syntax only: no state exists when a workflow is stored, so unknown paths can
 * only be found when the step runs. */
static void check_template(jcheck_errlist *e, const char *path, const char *tpl)
{
    char msg[WORKFLOW_ERR_MAX];
    if (template_run(tpl, NULL, NULL, NULL, msg, sizeof msg)) jcheck_mistake(e, path, "%s", msg);
}

static void check_template_field(jcheck_errlist *e, const char *base, const json_t *obj,
                                 const char *key, int required)
{
    char path[WF_JPATH];
    const char *s = get_string(e, base, obj, key, required);
    jcheck_key(path, sizeof path, base, key);
    if (s) check_template(e, path, s);
}

/* An agent step's skill: {"name": a skill of the agent, "params": {name: template}}.
 * Whether the agent has that skill is known only when the step runs (agents change
 * independently of workflows); the shape is checked here. */
static void check_skill(jcheck_errlist *e, const char *base, const json_t *st)
{
    static const char *const keys[] = {"name", "params", NULL};
    char path[WF_JPATH], sub[WF_JPATH];
    const json_t *sk = json_object_get(st, "skill");
    if (!sk) return;
    jcheck_key(path, sizeof path, base, "skill");
    if (!json_is_object(sk)) {
        jcheck_mistake(e, path, "must be {\"name\": skill, \"params\": {name: template}}");
        return;
    }
    jcheck_unknown_keys(e, path, sk, keys);
    check_name(e, path, sk, "name", 1);
    const json_t *params = json_object_get(sk, "params");
    jcheck_key(sub, sizeof sub, path, "params");
    if (params && !json_is_object(params)) jcheck_mistake(e, sub, "must be an object of templates");
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)params, k, v) {
        char p2[WF_JPATH];
        jcheck_key(p2, sizeof p2, sub, k);
        if (!json_is_string(v)) jcheck_mistake(e, p2, "must be a string (a template)");
        else check_template(e, p2, json_string_value(v));
    }
}

/* The strings of an update value or of tool arguments: specials where flags
 * allow them, templates otherwise. */
static void check_value(jcheck_errlist *e, const char *path, const json_t *v, unsigned flags,
                        int depth)
{
    char sub[WF_JPATH];
    if (depth > WF_VALUE_DEPTH) {
        jcheck_mistake(e, path, "nested deeper than %d", WF_VALUE_DEPTH);
        return;
    }
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (flags & SUB_ON) {
            if (strcmp(s, "$output") == 0) {
                if (!(flags & SUB_OUTPUT))
                    jcheck_mistake(e, path, "\"$output\" exists only in agent and tool steps");
                return;
            }
            if (strcmp(s, "$response") == 0) {
                if (!(flags & SUB_RESPONSE))
                    jcheck_mistake(e, path, "\"$response\" exists only in human steps");
                return;
            }
            if (strcmp(s, "$input") == 0) return;
        }
        check_template(e, path, s);
    } else if (json_is_object(v)) {
        const char *key;
        const json_t *x;
        json_object_foreach((json_t *)v, key, x) {
            jcheck_key(sub, sizeof sub, path, key);
            check_value(e, sub, x, flags, depth + 1);
        }
    } else if (json_is_array(v)) {
        size_t i;
        const json_t *x;
        json_array_foreach(v, i, x) {
            jcheck_index(sub, sizeof sub, path, "", i);
            check_value(e, sub, x, flags, depth + 1);
        }
    }
}

/* obj.key as an update: an object of state paths to values, whose specials
 * are limited to flags (what the step kind can supply). */
static void check_update(jcheck_errlist *e, const char *base, const json_t *obj, const char *key,
                         int required, unsigned flags)
{
    char path[WF_JPATH], sub[WF_JPATH];
    const json_t *upd = json_object_get(obj, key);
    jcheck_key(path, sizeof path, base, key);
    if (!upd) {
        if (required) jcheck_mistake(e, path, "missing");
        return;
    }
    if (!json_is_object(upd)) {
        jcheck_mistake(e, path, "must be an object of state paths");
        return;
    }
    const char *k;
    size_t klen;
    const json_t *v;
    json_object_keylen_foreach((json_t *)upd, k, klen, v) {
        jcheck_key(sub, sizeof sub, path, k);
        if (!path_ok(k, klen))
            jcheck_mistake(e, sub, "not a state path (dot-separated names of A-Z a-z 0-9 _ -)");
        check_value(e, sub, v, flags | SUB_ON, 0);
    }
}

/* An outputSchema, checked against the subset workflow_check_schema implements:
 * a keyword we would not enforce is a mistake, so that no constraint a user
 * wrote is silently skipped. */
static void check_schema_doc(jcheck_errlist *e, const char *path, const json_t *s, int depth)
{
    char sub[WF_JPATH];
    if (depth > WF_VALUE_DEPTH) {
        jcheck_mistake(e, path, "nested deeper than %d", WF_VALUE_DEPTH);
        return;
    }
    if (!json_is_object(s)) {
        jcheck_mistake(e, path, "a schema must be an object");
        return;
    }
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)s, key, v) {
        jcheck_key(sub, sizeof sub, path, key);
        if (strcmp(key, "type") == 0) {
            size_t i;
            const json_t *t;
            if (json_is_string(v) && jcheck_in_list(json_string_value(v), schema_types)) continue;
            int ok = json_is_array(v) && json_array_size(v) > 0;
            json_array_foreach(v, i, t)
                if (!json_is_string(t) || !jcheck_in_list(json_string_value(t), schema_types))
                    ok = 0;
            if (!ok)
                jcheck_mistake(e, sub, "must be one of object, array, string, number, integer, "
                                       "boolean, null (or an array of them)");
        } else if (strcmp(key, "properties") == 0) {
            if (!json_is_object(v)) {
                jcheck_mistake(e, sub, "must be an object of schemas");
                continue;
            }
            const char *pk;
            const json_t *pv;
            char psub[WF_JPATH];
            json_object_foreach((json_t *)v, pk, pv) {
                jcheck_key(psub, sizeof psub, sub, pk);
                check_schema_doc(e, psub, pv, depth + 1);
            }
        } else if (strcmp(key, "required") == 0) {
            size_t i;
            const json_t *r;
            int ok = json_is_array(v);
            json_array_foreach(v, i, r)
                if (!json_is_string(r)) ok = 0;
            if (!ok) jcheck_mistake(e, sub, "must be an array of property names");
        } else if (strcmp(key, "items") == 0) {
            check_schema_doc(e, sub, v, depth + 1);
        } else if (strcmp(key, "enum") == 0) {
            if (!json_is_array(v) || json_array_size(v) == 0)
                jcheck_mistake(e, sub, "must be a non-empty array");
        } else if (!jcheck_in_list(key, schema_notes)) {
            jcheck_mistake(e, sub, "unsupported schema keyword (supported: type, properties, "
                                   "required, items, enum)");
        }
    }
}

/* Index of the first phase named name, or -1. */
static long find_phase(const json_t *phases, const char *name)
{
    size_t i;
    const json_t *ph;
    json_array_foreach(phases, i, ph) {
        const json_t *n = json_object_get(ph, "name");
        if (json_is_string(n) && strcmp(json_string_value(n), name) == 0) return (long)i;
    }
    return -1;
}

static const char *const agent_keys[] = {"kind", "name", "agent", "prompt", "outputSchema",
                                         "update", "skill", NULL};
static const char *const tool_keys[] = {"kind", "name", "server", "tool", "arguments",
                                        "update", NULL};
static const char *const update_keys[] = {"kind", "name", "set", NULL};
static const char *const human_keys[] = {"kind", "name", "id", "input", "prompt", "options",
                                         "timeoutMs", "onTimeout", "update", NULL};

/* The step kinds by their document names; -1 for anything else. */
static int kind_of(const char *s, step_kind *k)
{
    if (!s) return -1;
    if (strcmp(s, "agent") == 0) *k = STEP_AGENT;
    else if (strcmp(s, "tool") == 0) *k = STEP_TOOL;
    else if (strcmp(s, "update") == 0) *k = STEP_UPDATE;
    else if (strcmp(s, "human") == 0) *k = STEP_HUMAN;
    else return -1;
    return 0;
}

/* A human checkpoint. Its rules tie fields together (options with choice,
 * onTimeout with timeoutMs, the default answer with the input kind), so it is
 * checked as a whole rather than field by field. */
static void check_human(vctx *v, const char *base, const json_t *st)
{
    jcheck_errlist *e = v->e;
    char path[WF_JPATH], sub[WF_JPATH], q[JCHECK_QUOTE];
    jcheck_unknown_keys(e, base, st, human_keys);

    const char *id = get_string(e, base, st, "id", 1);
    jcheck_key(path, sizeof path, base, "id");
    if (id && !agent_valid_name(id)) {
        jcheck_mistake(e, path, "must be 1 to 64 of A-Z a-z 0-9 _ . -");
    } else if (id) {
        /* Answers name the checkpoint by id, so two alike could not be told apart. */
        const json_t *seen = json_object_get(v->ids, id);
        if (seen)
            jcheck_mistake(e, path, "duplicate id \"%s\" (also %s)",
                           jcheck_show(q, sizeof q, id, strlen(id)), json_string_value(seen));
        else
            json_object_set_new(v->ids, id, json_string(path));
    }

    const char *input = get_string(e, base, st, "input", 1);
    int choice = input && strcmp(input, "choice") == 0;
    jcheck_key(path, sizeof path, base, "input");
    if (input && !choice && strcmp(input, "approval") != 0 && strcmp(input, "text") != 0)
        jcheck_mistake(e, path, "must be \"approval\", \"choice\" or \"text\"");

    check_template_field(e, base, st, "prompt", 1);

    const json_t *opts = json_object_get(st, "options");
    int opts_ok = 0;
    jcheck_key(path, sizeof path, base, "options");
    if (opts && input && !choice) {
        jcheck_mistake(e, path, "only allowed with input \"choice\"");
    } else if (!opts && choice) {
        jcheck_mistake(e, path, "missing (required for input \"choice\")");
    } else if (opts) {
        size_t n = json_array_size(opts), i, j;
        const json_t *o;
        opts_ok = 1;
        if (!json_is_array(opts) || n < WF_OPTIONS_MIN || n > WF_OPTIONS_MAX) {
            jcheck_mistake(e, path, "must be an array of %d to %d strings", WF_OPTIONS_MIN,
                           WF_OPTIONS_MAX);
            opts_ok = 0;
        }
        json_array_foreach(opts, i, o) {
            jcheck_index(sub, sizeof sub, base, "options", i);
            if (!json_is_string(o) || json_string_length(o) == 0) {
                jcheck_mistake(e, sub, "must be a non-empty string");
                opts_ok = 0;
                continue;
            }
            for (j = 0; j < i; j++)
                if (json_equal(o, json_array_get(opts, j))) break;
            if (j < i) jcheck_mistake(e, sub, "duplicate option (also options[%zu])", j);
        }
    }

    const json_t *tmo = json_object_get(st, "timeoutMs");
    jcheck_key(path, sizeof path, base, "timeoutMs");
    if (tmo && (!json_is_integer(tmo) || json_integer_value(tmo) <= 0))
        jcheck_mistake(e, path, "must be an integer > 0");

    const json_t *ot = json_object_get(st, "onTimeout");
    jcheck_key(path, sizeof path, base, "onTimeout");
    if (ot) {
        static const char *const ot_keys[] = {"response", NULL};
        if (!json_is_object(ot)) {
            jcheck_mistake(e, path, "must be an object {\"response\": value}");
        } else {
            jcheck_unknown_keys(e, path, ot, ot_keys);
            const json_t *resp = json_object_get(ot, "response");
            jcheck_key(sub, sizeof sub, path, "response");
            /* The default answer must fit the input as a real answer must
             * (POST /v1/sessions/{id}/input applies the same rule). */
            if (!resp) {
                jcheck_mistake(e, sub, "missing");
            } else if (choice && opts_ok) {
                size_t i;
                const json_t *o;
                int any = 0;
                json_array_foreach(opts, i, o)
                    if (json_equal(o, resp)) any = 1;
                if (!any) jcheck_mistake(e, sub, "must be one of the options");
            } else if (input && strcmp(input, "approval") == 0 && !json_is_boolean(resp)) {
                jcheck_mistake(e, sub, "must be true or false for input \"approval\"");
            } else if (input && strcmp(input, "text") == 0 && !json_is_string(resp)) {
                jcheck_mistake(e, sub, "must be a string for input \"text\"");
            }
        }
        if (!tmo)
            jcheck_mistake(e, path, "needs timeoutMs (without it the checkpoint never expires)");
    }
    check_update(e, base, st, "update", 0, SUB_RESPONSE | SUB_INPUT);
}

/* One step: its kind decides which keys it may have and what they mean. */
static void check_step(vctx *v, const char *base, const json_t *st)
{
    jcheck_errlist *e = v->e;
    char path[WF_JPATH];
    if (!json_is_object(st)) {
        jcheck_mistake(e, base, "a step must be an object");
        return;
    }
    get_string(e, base, st, "name", 0);
    const char *kind = get_string(e, base, st, "kind", 1);
    step_kind k;
    jcheck_key(path, sizeof path, base, "kind");
    /* Without a known kind the allowed keys are unknown too: say only that. */
    if (!kind) return;
    if (kind_of(kind, &k)) {
        jcheck_mistake(e, path, "must be \"agent\", \"tool\", \"update\" or \"human\"");
        return;
    }
    switch (k) {
    case STEP_AGENT: {
        jcheck_unknown_keys(e, base, st, agent_keys);
        check_name(e, base, st, "agent", 1);
        check_template_field(e, base, st, "prompt", 1);
        check_skill(e, base, st);
        const json_t *os = json_object_get(st, "outputSchema");
        jcheck_key(path, sizeof path, base, "outputSchema");
        if (os) check_schema_doc(e, path, os, 0);
        check_update(e, base, st, "update", 0, SUB_OUTPUT | SUB_INPUT);
        break;
    }
    case STEP_TOOL: {
        jcheck_unknown_keys(e, base, st, tool_keys);
        check_name(e, base, st, "server", 1);
        const char *tool = get_string(e, base, st, "tool", 1);
        jcheck_key(path, sizeof path, base, "tool");
        if (tool && (tool[0] == '\0' || strlen(tool) > WF_TOOL_MAX))
            jcheck_mistake(e, path, "must be 1 to %d bytes", WF_TOOL_MAX);
        const json_t *args = json_object_get(st, "arguments");
        jcheck_key(path, sizeof path, base, "arguments");
        if (args && !json_is_object(args)) jcheck_mistake(e, path, "must be an object");
        else if (args) check_value(e, path, args, 0, 0);
        check_update(e, base, st, "update", 0, SUB_OUTPUT | SUB_INPUT);
        break;
    }
    case STEP_UPDATE:
        jcheck_unknown_keys(e, base, st, update_keys);
        check_update(e, base, st, "set", 1, SUB_INPUT);
        break;
    case STEP_HUMAN:
        check_human(v, base, st);
        break;
    }
}

/* A transition: its target must exist and its condition must parse, so that
 * a stored workflow cannot fail on a typo only when a session gets that far. */
static void check_transition(vctx *v, const char *base, const json_t *t)
{
    static const char *const keys[] = {"when", "to", NULL};
    jcheck_errlist *e = v->e;
    char path[WF_JPATH], msg[WORKFLOW_ERR_MAX], q[JCHECK_QUOTE];
    if (!json_is_object(t)) {
        jcheck_mistake(e, base, "a transition must be an object {\"when\", \"to\"}");
        return;
    }
    jcheck_unknown_keys(e, base, t, keys);
    const char *when = get_string(e, base, t, "when", 0);
    jcheck_key(path, sizeof path, base, "when");
    if (when && workflow_check_condition(when, msg, sizeof msg)) jcheck_mistake(e, path, "%s", msg);
    const char *to = get_string(e, base, t, "to", 1);
    jcheck_key(path, sizeof path, base, "to");
    if (to && v->phases && find_phase(v->phases, to) < 0)
        jcheck_mistake(e, path, "no phase named \"%s\"", jcheck_show(q, sizeof q, to, strlen(to)));
}

/* Phase pi: its own fields, then its steps and transitions, then the rules
 * that relate them (terminal phases end, the others must lead somewhere). */
static void check_phase(vctx *v, size_t pi, const json_t *ph)
{
    static const char *const keys[] = {"name", "terminal", "steps", "transitions", NULL};
    jcheck_errlist *e = v->e;
    char base[WF_JPATH], path[WF_JPATH], sub[WF_JPATH], q[JCHECK_QUOTE];
    jcheck_index(base, sizeof base, "", "phases", pi);
    if (!json_is_object(ph)) {
        jcheck_mistake(e, base, "a phase must be an object");
        return;
    }
    jcheck_unknown_keys(e, base, ph, keys);
    check_name(e, base, ph, "name", 1);
    const char *name = json_string_value(json_object_get(ph, "name"));
    long first = name ? find_phase(v->phases, name) : -1;
    jcheck_key(path, sizeof path, base, "name");
    if (name && first >= 0 && (size_t)first < pi)
        jcheck_mistake(e, path, "duplicate phase name \"%s\" (also phases[%ld])",
                       jcheck_show(q, sizeof q, name, strlen(name)), first);

    const json_t *term = json_object_get(ph, "terminal");
    jcheck_key(path, sizeof path, base, "terminal");
    if (term && !json_is_boolean(term)) jcheck_mistake(e, path, "must be true or false");
    int terminal = json_is_true(term);

    /* steps and transitions may be left out: an absent list is an empty one. */
    const json_t *steps = json_object_get(ph, "steps");
    jcheck_key(path, sizeof path, base, "steps");
    if (steps && (!json_is_array(steps) || json_array_size(steps) > WF_STEPS_MAX)) {
        jcheck_mistake(e, path, "must be an array of at most %d steps", WF_STEPS_MAX);
    }
    size_t i;
    const json_t *x;
    json_array_foreach(steps, i, x) {
        jcheck_index(sub, sizeof sub, base, "steps", i);
        check_step(v, sub, x);
    }

    const json_t *trans = json_object_get(ph, "transitions");
    jcheck_key(path, sizeof path, base, "transitions");
    if (trans && (!json_is_array(trans) || json_array_size(trans) > WF_TRANSITIONS_MAX))
        jcheck_mistake(e, path, "must be an array of at most %d transitions", WF_TRANSITIONS_MAX);
    json_array_foreach(trans, i, x) {
        jcheck_index(sub, sizeof sub, base, "transitions", i);
        check_transition(v, sub, x);
    }
    size_t nt = json_array_size(trans);
    if (terminal && nt > 0)
        jcheck_mistake(e, path, "a terminal phase ends the workflow: it has no transitions");
    if (!terminal && nt == 0 && (!trans || json_is_array(trans)))
        jcheck_mistake(e, path, "a phase that is not terminal needs at least one transition");
}

/* A non-terminal phase that runs no step (and so cannot change the state). */
static int phase_stepless(const json_t *ph)
{
    return json_is_object(ph) && json_array_size(json_object_get(ph, "steps")) == 0 &&
           !json_is_true(json_object_get(ph, "terminal"));
}

/* A phase without steps cannot change the state (nor the input), so its
 * conditions answer the same every time: a session that goes round a cycle of
 * such phases once goes round it for ever, writing events as fast as the runner
 * can. Any cycle through transitions (conditional or not) among phases without
 * steps is therefore a mistake. Reachability over those phases (at most
 * WF_PHASES_MAX, so a cubic closure is cheap) finds every cycle; each is named
 * once, at its first phase, with the phases it goes through. */
static void check_loops(vctx *v)
{
    enum { N = WF_PHASES_MAX };
    size_t n = json_array_size(v->phases), i, j, k, t;
    if (n > N) return;
    unsigned char reach[N][N];
    memset(reach, 0, sizeof reach);
    for (i = 0; i < n; i++) {
        const json_t *ph = json_array_get(v->phases, i), *tr;
        if (!phase_stepless(ph)) continue;
        json_array_foreach(json_object_get(ph, "transitions"), t, tr) {
            const char *to = json_string_value(json_object_get(tr, "to"));
            long next = to ? find_phase(v->phases, to) : -1;
            if (next >= 0 && phase_stepless(json_array_get(v->phases, (size_t)next)))
                reach[i][next] = 1;
        }
    }
    for (k = 0; k < n; k++)
        for (i = 0; i < n; i++)
            if (reach[i][k])
                for (j = 0; j < n; j++) reach[i][j] |= reach[k][j];
    char path[WF_JPATH], names[256], q[JCHECK_QUOTE];
    for (i = 0; i < n; i++) {
        if (!reach[i][i]) continue;
        int first = 1;
        for (j = 0; j < i && first; j++)
            if (reach[i][j] && reach[j][i]) first = 0;
        if (!first) continue;
        size_t len = 0;
        names[0] = '\0';
        for (j = i; j < n && len < sizeof names; j++) {
            if (!(reach[i][j] && reach[j][i])) continue;
            const char *nm = json_string_value(json_object_get(json_array_get(v->phases, j), "name"));
            int w = snprintf(names + len, sizeof names - len, "%s\"%s\"", len ? ", " : "",
                             jcheck_show(q, sizeof q, nm ? nm : "?", nm ? strlen(nm) : 1));
            if (w < 0) break;
            len += (size_t)w;
        }
        jcheck_index(path, sizeof path, "", "phases", i);
        jcheck_mistake(v->e, path, "loops for ever through phases without steps (%s): a phase with no "
                       "step cannot change the state, so its transitions answer the same every time",
                       names);
    }
}

int workflow_validate(const json_t *doc, char *err, size_t errcap)
{
    static const char *const keys[] = {"name", "description", "initialState", "initialPhase",
                                       "phases", "maxSteps", NULL};
    jcheck_errlist e;
    vctx v = {&e, NULL, NULL};
    char q[JCHECK_QUOTE];
    jcheck_init(&e, err, errcap, WF_JPATH);
    if (!json_is_object(doc)) {
        jcheck_mistake(&e, "$", "a workflow must be a JSON object");
        return -1;
    }
    /* Human ids are unique across phases, so they are collected document-wide. */
    v.ids = json_object();
    if (!v.ids) {
        jcheck_mistake(&e, "$", "out of memory");
        return -1;
    }
    jcheck_unknown_keys(&e, "", doc, keys);
    check_name(&e, "", doc, "name", 1);
    get_string(&e, "", doc, "description", 0);
    const json_t *is = json_object_get(doc, "initialState");
    if (is && !json_is_object(is)) jcheck_mistake(&e, "initialState", "must be an object");
    const json_t *ms = json_object_get(doc, "maxSteps");
    if (ms && (!json_is_integer(ms) || json_integer_value(ms) < 1 ||
               json_integer_value(ms) > WORKFLOW_MAX_STEPS_LIMIT))
        jcheck_mistake(&e, "maxSteps", "must be an integer from 1 to %d", WORKFLOW_MAX_STEPS_LIMIT);

    const json_t *phases = json_object_get(doc, "phases");
    if (!phases) {
        jcheck_mistake(&e, "phases", "missing");
    } else if (!json_is_array(phases) || json_array_size(phases) == 0 ||
               json_array_size(phases) > WF_PHASES_MAX) {
        jcheck_mistake(&e, "phases", "must be an array of 1 to %d phases", WF_PHASES_MAX);
    }
    if (json_is_array(phases)) {
        v.phases = phases;
        size_t i;
        const json_t *ph;
        json_array_foreach(phases, i, ph) check_phase(&v, i, ph);
        check_loops(&v);
    }

    /* Checked last, when the phases (and so the names it may refer to) are known. */
    const char *ip = get_string(&e, "", doc, "initialPhase", 0);
    if (ip && v.phases && find_phase(v.phases, ip) < 0)
        jcheck_mistake(&e, "initialPhase", "no phase named \"%s\"",
                       jcheck_show(q, sizeof q, ip, strlen(ip)));
    json_decref(v.ids);
    return e.n ? -1 : 0;
}

int workflow_max_steps(const json_t *doc)
{
    const json_t *ms = json_object_get(doc, "maxSteps");
    json_int_t n = json_is_integer(ms) ? json_integer_value(ms) : 0;
    return n >= 1 && n <= WORKFLOW_MAX_STEPS_LIMIT ? (int)n : WORKFLOW_MAX_STEPS_DEFAULT;
}

/* ---- the decision core ----------------------------------------------------------- */

static void next_fail(workflow_next_t *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Decide NEXT_FAIL with a message; the runner puts it in workflow:failed. */
static void next_fail(workflow_next_t *out, const char *fmt, ...)
{
    va_list ap;
    out->kind = NEXT_FAIL;
    va_start(ap, fmt);
    vsnprintf(out->error, sizeof out->error, fmt, ap);
    va_end(ap);
}

void workflow_next(const json_t *doc, const workflow_pos *pos, const json_t *state,
                   const json_t *input, workflow_next_t *out)
{
    char q[JCHECK_QUOTE], msg[WORKFLOW_ERR_MAX];
    memset(out, 0, sizeof *out);
    out->kind = NEXT_WAIT;
    /* A finished session has nothing left to do, whatever else pos says. */
    if (!pos || pos->finished) return;

    const json_t *phases = json_object_get(doc, "phases");
    if (!json_is_array(phases) || json_array_size(phases) == 0) {
        next_fail(out, "the workflow has no phases");
        return;
    }
    /* Before the first phase:entered the answer is the initial phase, whether
     * the runner still has to start the workflow or only to enter it. */
    if (!pos->started || !pos->phase) {
        const json_t *ip = json_object_get(doc, "initialPhase");
        const char *first = json_string_value(ip ? ip : json_object_get(json_array_get(phases, 0),
                                                                        "name"));
        if (!first || find_phase(phases, first) < 0) {
            next_fail(out, "the initial phase is not in the workflow");
            return;
        }
        out->kind = pos->started ? NEXT_ENTER_PHASE : NEXT_START;
        out->phase = first;
        return;
    }

    /* Checked before step_open: a session whose phase the document does not
     * know (a stored event from a different version) cannot go on at all. */
    long pi = find_phase(phases, pos->phase);
    if (pi < 0) {
        next_fail(out, "phase \"%s\" is not in the workflow",
                  jcheck_show(q, sizeof q, pos->phase, strlen(pos->phase)));
        return;
    }
    const json_t *ph = json_array_get(phases, (size_t)pi);
    out->phase = json_string_value(json_object_get(ph, "name"));
    if (pos->step_open) return;     /* NEXT_WAIT: the step's result comes first */

    const json_t *steps = json_object_get(ph, "steps");
    size_t nsteps = json_array_size(steps);
    if (pos->step < 0) {
        next_fail(out, "invalid position: step %d", pos->step);
        return;
    }
    /* The reducer counts completed steps, so that count is the next index. */
    if ((size_t)pos->step < nsteps) {
        const json_t *st = json_array_get(steps, (size_t)pos->step);
        if (kind_of(json_string_value(json_object_get(st, "kind")), &out->step_kind)) {
            next_fail(out, "phases[%ld].steps[%d]: unknown step kind", pi, pos->step);
            return;
        }
        out->kind = NEXT_STEP;
        out->step = pos->step;
        out->def = st;
        return;
    }
    /* A terminal phase completes even if a transition slipped past validation. */
    if (json_is_true(json_object_get(ph, "terminal"))) {
        out->kind = NEXT_COMPLETE;
        return;
    }
    /* First matching transition wins, as written; a condition that does not
     * parse fails the workflow rather than being read as false. */
    const json_t *trans = json_object_get(ph, "transitions");
    size_t i;
    const json_t *t;
    json_array_foreach(trans, i, t) {
        const json_t *when = json_object_get(t, "when");
        if (when) {
            int r = workflow_eval(json_string_value(when), state, input, msg, sizeof msg);
            if (r < 0) {
                next_fail(out, "phases[%ld].transitions[%zu].when: %s", pi, i, msg);
                return;
            }
            if (r == 0) continue;
        }
        const char *to = json_string_value(json_object_get(t, "to"));
        if (!to || find_phase(phases, to) < 0) {
            next_fail(out, "phases[%ld].transitions[%zu].to: not a phase of the workflow", pi, i);
            return;
        }
        out->kind = NEXT_TRANSITION;
        out->phase = to;    /* borrowed from the document like every name here */
        return;
    }
    next_fail(out, "no transition from phase %s matched",
              jcheck_show(q, sizeof q, out->phase, strlen(out->phase)));
}
