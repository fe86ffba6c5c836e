/* The invariants of a database that a backup's check (lib/backup.h) looks for, as
 * queries, the same on every engine (lib/store/sqlite/sq_backup.c and
 * lib/store/pg/pg_backup.c run them): each row a query returns is a problem,
 * reported with the rule's name and the row's columns, in the order of the
 * query's ORDER BY, so that both engines report alike.
 *
 * Written once, with an engine's own spelling of two things: the length in bytes
 * of a message's data, BYTES_OPEN "m.data" BYTES_CLOSE (SQLite casts it to a
 * BLOB, as a value stored as text would count characters), and TEXT_ORDER after a
 * text key of an ORDER BY (its byte-order collation, "" where that is the
 * default). Included by the engines only: SQL stays below lib/store.h. */
#ifndef DSTREAM_STORE_CHECK_H
#define DSTREAM_STORE_CHECK_H

typedef struct store_check_rule {
    const char *name;
    const char *sql;
} store_check_rule;

/* The hash chain (lib/chain.h), which no query states: each engine walks every
 * stream's messages in order of seq, streams in order of id, and reports the first
 * message of a stream whose digest is not the digest of it after the one before it
 * (a fork's first after its parent's at the fork point), as
 * "STORE_CHECK_CHAIN: path=P offset=O" (O the message's offset), and a stream
 * whose row's digest is not its last message's (its chain's start when it has
 * none) as "STORE_CHECK_CHAIN_TAIL: path=P". */
#define STORE_CHECK_CHAIN "hash chain broken"
#define STORE_CHECK_CHAIN_TAIL "stream's digest is not its chain's at the tail"

#define STORE_CHECK_RULES(BYTES_OPEN, BYTES_CLOSE, TEXT_ORDER)                                                  \
    {"stream messages not contiguous from fork point to tail",                                                 \
     "SELECT s.path, s.fork_seq, s.tail_seq, count(m.seq) AS messages, min(m.seq) AS first,"                   \
     " max(m.seq) AS last"                                                                                      \
     " FROM streams s LEFT JOIN messages m ON m.stream = s.id GROUP BY s.id"                                    \
     " HAVING count(m.seq) != s.tail_seq - s.fork_seq"                                                          \
     " OR (count(m.seq) > 0 AND (min(m.seq) != s.fork_seq OR max(m.seq) != s.tail_seq - 1)) ORDER BY s.id"},   \
    {"message position does not follow the one before",                                                        \
     "SELECT s.path, m.seq, n.pos AS next_pos, m.pos + " BYTES_OPEN "m.data" BYTES_CLOSE " AS expected"         \
     " FROM messages m JOIN messages n ON n.stream = m.stream AND n.seq = m.seq + 1"                            \
     " JOIN streams s ON s.id = m.stream"                                                                       \
     " WHERE n.pos != m.pos + " BYTES_OPEN "m.data" BYTES_CLOSE " ORDER BY m.stream, m.seq"},                  \
    {"stream's first message or tail position wrong",                                                          \
     "SELECT s.path, s.fork_pos, f.pos AS first_pos, s.tail_pos FROM streams s"                                 \
     " LEFT JOIN messages f ON f.stream = s.id AND f.seq = s.fork_seq"                                          \
     " LEFT JOIN messages l ON l.stream = s.id AND l.seq = s.tail_seq - 1"                                      \
     " WHERE (s.tail_seq > s.fork_seq AND (f.pos IS NULL OR f.pos != s.fork_pos"                                \
     "        OR l.pos IS NULL OR l.pos + " BYTES_OPEN "l.data" BYTES_CLOSE " != s.tail_pos))"                  \
     " OR (s.tail_seq = s.fork_seq AND s.tail_pos != s.fork_pos) ORDER BY s.id"},                              \
    {"message's record starts after it or before the fork point",                                              \
     "SELECT s.path, m.seq, m.rec FROM messages m JOIN streams s ON s.id = m.stream"                            \
     " WHERE m.rec > m.seq OR m.rec < s.fork_seq ORDER BY m.stream, m.seq"},                                    \
    {"fork whose parent is missing or shorter than the fork point",                                            \
     "SELECT c.path, c.parent, c.fork_seq FROM streams c LEFT JOIN streams p ON p.id = c.parent"                \
     " WHERE c.parent IS NOT NULL AND (p.id IS NULL OR c.fork_seq > p.tail_seq) ORDER BY c.id"},               \
    {"deleted stream kept although no fork reads it",                                                          \
     "SELECT path, forks FROM streams WHERE deleted = 1 AND forks <= 0 ORDER BY id"},                          \
    {"messages of a stream that does not exist",                                                               \
     "SELECT m.stream, count(*) AS messages FROM messages m LEFT JOIN streams s ON s.id = m.stream"            \
     " WHERE s.id IS NULL GROUP BY m.stream ORDER BY m.stream"},                                                \
    {"producer state of a stream that does not exist",                                                         \
     "SELECT p.stream, p.producer FROM producers p LEFT JOIN streams s ON s.id = p.stream"                      \
     " WHERE s.id IS NULL ORDER BY p.stream, p.producer" TEXT_ORDER},                                           \
    {"session without its event stream",                                                                       \
     "SELECT x.id, x.stream FROM sessions x LEFT JOIN streams s ON s.path = x.stream"                           \
     " WHERE x.deleted = 0 AND (s.id IS NULL OR s.deleted = 1) ORDER BY x.id" TEXT_ORDER},                      \
    {"snapshot not on a message boundary of its session's stream",                                             \
     "SELECT x.id, n.seq, n.pos FROM snapshots n JOIN sessions x ON x.id = n.session"                           \
     " JOIN streams s ON s.path = x.stream AND s.deleted = 0"                                                   \
     " LEFT JOIN messages m ON m.stream = s.id AND m.seq = n.seq"                                               \
     " WHERE n.seq > s.tail_seq"                                                                                \
     " OR (n.seq = s.tail_seq AND n.pos != s.tail_pos)"                                                         \
     " OR (n.seq < s.tail_seq AND n.seq >= s.fork_seq AND (m.pos IS NULL OR m.pos != n.pos))"                  \
     " ORDER BY x.id" TEXT_ORDER ", n.seq"}

#endif
