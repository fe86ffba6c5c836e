#!/usr/bin/env python3
"""The messages table's two layouts on SQLite, without the stack: the one in use
(WITHOUT ROWID, primary key (stream, seq), sql/sqlite/001_streams.sql) against a
rowid table whose INTEGER PRIMARY KEY is stream << 32 | seq (the same order). Rows
of one size are appended to many streams in turn, a commit every ROWS_PER_COMMIT
rows, with the runner's settings (WAL, synchronous=FULL, a checkpoint every 4,000
pages), after 100 rows of history a stream. Prints the process's CPU and wall time a
row and the bytes it wrote (/proc/self/io) for each layout, twice, interleaved.

The loop runs in Python: its own cost (a few us a row) is in both columns alike, so
only the difference between them says anything.

    python3 bench/sqlite-layout.py [STREAMS=200] [ROWS=60000] [SIZE=275] [ROWS_PER_COMMIT="55 270"]
"""
import os
import sqlite3
import sys
import tempfile
import time


def arg(name, default):
    for a in sys.argv[1:]:
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return os.environ.get(name, default)


def written():
    for line in open("/proc/self/io"):
        if line.startswith("write_bytes:"):
            return int(line.split()[1])
    return 0


def run(kind, path, streams, rows, size, per_commit):
    for s in ("", "-wal", "-shm"):
        try:
            os.remove(path + s)
        except FileNotFoundError:
            pass
    c = sqlite3.connect(path, isolation_level=None)
    c.execute("PRAGMA journal_mode=WAL")
    c.execute("PRAGMA wal_autocheckpoint=4000")
    c.execute("PRAGMA synchronous=FULL")
    if kind == "without-rowid":
        c.execute("CREATE TABLE m (stream INTEGER NOT NULL, seq INTEGER NOT NULL, pos INTEGER NOT NULL,"
                  " rec INTEGER NOT NULL, data BLOB NOT NULL, digest BLOB, PRIMARY KEY (stream, seq))"
                  " WITHOUT ROWID")
        ins = "INSERT INTO m VALUES (?, ?, ?, ?, ?, ?)"

        def key(s, q):
            return (s, q)
    else:
        c.execute("CREATE TABLE m (id INTEGER PRIMARY KEY, pos INTEGER NOT NULL, rec INTEGER NOT NULL,"
                  " data BLOB NOT NULL, digest BLOB)")
        ins = "INSERT INTO m VALUES (?, ?, ?, ?, ?)"

        def key(s, q):
            return ((s << 32) | q,)
    data, digest = os.urandom(size), os.urandom(32)
    seq = [0] * streams
    c.execute("BEGIN")
    for _ in range(100):
        for s in range(streams):
            c.execute(ins, key(s, seq[s]) + (0, 0, data, digest))
            seq[s] += 1
    c.execute("COMMIT")
    w0, t0, c0 = written(), time.time(), time.process_time()
    n = i = 0
    while n < rows:
        c.execute("BEGIN")
        for _ in range(per_commit):
            s = i % streams
            i += 1
            c.execute(ins, key(s, seq[s]) + (0, 0, data, digest))
            seq[s] += 1
            n += 1
        c.execute("COMMIT")
    cpu, wall, w = time.process_time() - c0, time.time() - t0, written() - w0
    c.close()
    print("| %s | %d | %.1f | %.1f | %.0f |" % (kind, per_commit, cpu / n * 1e6, wall / n * 1e6, w / n))


def main():
    streams = int(arg("STREAMS", "200"))
    rows = int(arg("ROWS", "60000"))
    size = int(arg("SIZE", "275"))
    per = [int(x) for x in arg("ROWS_PER_COMMIT", "55 270").split()]
    d = tempfile.mkdtemp(prefix="dstream-layout.")
    path = os.path.join(d, "layout.db")
    print("| layout | rows a commit | CPU us a row | wall us a row | bytes written a row |")
    print("|---|---:|---:|---:|---:|")
    try:
        for _ in range(2):
            for p in per:
                for kind in ("without-rowid", "intkey"):
                    run(kind, path, streams, rows, size, p)
    finally:
        for s in ("", "-wal", "-shm"):
            try:
                os.remove(path + s)
            except FileNotFoundError:
                pass
        os.rmdir(d)


if __name__ == "__main__":
    main()
