/* provevent: the events a provider's reply becomes (both wire formats give the same
 * sequence, lib/provider.h says how callers get them), and the parser state the
 * formats fill: the tool-call slots that hold a call back until its arguments are
 * whole, each with ceilings so that a hostile stream costs bounded memory. For
 * lib/provider and the format files (lib/anthropic, lib/openai); callers include
 * lib/provider.h. */
#ifndef DSTREAM_PROVEVENT_H
#define DSTREAM_PROVEVENT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define PROVIDER_LINE_MAX (1 << 20)     /* longest SSE line accepted */
#define PROVIDER_TOOL_ARGS_MAX (1 << 20) /* largest assembled tool-call arguments */

typedef enum { PROVIDER_ANTHROPIC, PROVIDER_OPENAI } provider_kind;

typedef enum {
    PEV_TEXT,       /* text, len: a piece of the reply (may hold NULs: use len) */
    PEV_THINKING,   /* text: a piece of the model's thinking */
    PEV_TOOL_CALL,  /* id, name, args: one complete tool call (arguments assembled
                       from their deltas when the block/call ends; args is JSON text,
                       "{}" when the model sent none) */
    PEV_USAGE,      /* input_tokens, output_tokens: totals so far (the last one wins) */
    PEV_STOP,       /* stop_reason: "end_turn", "tool_use", "max_tokens", "stop", ... */
    PEV_ERROR,      /* error_type, text: an error reported inside a 200 stream */
    PEV_DONE        /* the stream ended normally (message_stop / [DONE]) */
} pev_kind;

typedef struct provider_event {
    pev_kind kind;
    const char *text;       /* PEV_TEXT, PEV_THINKING, PEV_ERROR message */
    size_t len;
    const char *id, *name, *args;   /* PEV_TOOL_CALL */
    int64_t input_tokens, output_tokens;
    const char *stop_reason;
    const char *error_type; /* e.g. "overloaded_error" */
} provider_event;

/* Return non-zero to stop parsing (provider_feed returns that value). */
typedef int (*provider_event_fn)(void *ud, const provider_event *ev);

#define PROVIDER_DATA_MAX PROVIDER_LINE_MAX /* one event's data, all its lines */
#define PROVIDER_TOOLS_OPEN_MAX 64          /* tool calls in progress at once */
#define PROVIDER_TOOL_ID_MAX 4096           /* a tool call's id or name */

typedef struct provider_parser provider_parser;

/* The parser's state, open to lib/provider and the format files only (callers see
 * provider_parser through lib/provider.h's functions). */
typedef struct tool_slot {
    int64_t index;      /* content block index (Anthropic) or tool_calls[].index */
    buf_t id, name, args;
    json_t *input;      /* a non-empty "input" given at content_block_start */
} tool_slot;

struct provider_parser {
    provider_kind kind;
    provider_event_fn fn;
    void *ud;
    buf_t line;         /* the line being read, without its ending */
    buf_t event;        /* the "event:" field of the event being assembled */
    buf_t data;         /* its "data:" lines, joined with '\n' */
    buf_t scratch;      /* a text chunk's string with its escapes undone (lib/chunkscan) */
    int generic;        /* 1: every chunk through jansson, none through lib/chunkscan (tests) */
    int has_data;       /* a data field was seen (it may be empty) */
    int cr;             /* the last byte fed was '\r' */
    int first_line;     /* a UTF-8 BOM may open the stream */
    int status;         /* sticky: -1 or the callback's value once non-zero */
    int done;           /* PEV_DONE was delivered */
    /* The calls open now, in the order they opened: grown as calls open (most
     * replies open none), up to PROVIDER_TOOLS_OPEN_MAX, so that a parser, one per
     * request in flight, is small. */
    tool_slot *tools;
    size_t ntools, captools;
    int64_t input_tokens, output_tokens;
};

/* Hand ev to the parser's callback (none: 0, so that a parser without one still
 * parses and checks). Returns the callback's value. */
int pev_emit(provider_parser *p, provider_event *ev);
/* A PEV_TEXT or PEV_THINKING event of the JSON string s (nothing for an empty or
 * absent one). Returns 0 or the callback's value. */
int pev_text(provider_parser *p, pev_kind kind, const json_t *s);
/* A PEV_ERROR event: the provider's error type (NULL: "error") and message (a JSON
 * string; anything else: ""). Returns 0 or the callback's value. */
int pev_error(provider_parser *p, const char *type, const json_t *msg);
/* A PEV_USAGE event of the parser's totals. */
int pev_usage(provider_parser *p);
/* The PEV_DONE event; the parser is done from here on, whatever the callback says. */
int pev_done(provider_parser *p);
/* Free a slot's buffers. */
void pev_slot_free(tool_slot *t);
/* The open slot of index, or NULL. */
tool_slot *pev_slot_find(provider_parser *p, int64_t index);
/* The slot of index, opened if new. NULL when PROVIDER_TOOLS_OPEN_MAX are open (or
 * out of memory). A slot's address holds until the next slot opens. */
tool_slot *pev_slot_open(provider_parser *p, int64_t index);
/* Replace a slot's id or name (b) with s, a JSON string (anything else: left as it
 * is). Returns 0, or -1 past PROVIDER_TOOL_ID_MAX. */
int pev_slot_set(buf_t *b, const json_t *s);
/* 1 for JSON's whitespace. */
int pev_is_ws(char c);
/* Deliver slot i as one PEV_TOOL_CALL and close it. Returns -1 if its arguments
 * are not JSON or its id or name holds a NUL, else 0 or the callback's value. */
int pev_slot_close(provider_parser *p, size_t i);
/* Deliver every open call, in the order they were opened. */
int pev_slots_flush(provider_parser *p);
/* The token count o[key]; *found set if there was one. A negative count from a
 * confused server counts as none rather than reducing a total. */
int64_t pev_tokens(const json_t *o, const char *key, int *found);

#endif
