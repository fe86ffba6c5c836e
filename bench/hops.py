#!/usr/bin/env python3
"""bench/hops.py PREFIX: split each stamped delta's latency into its hops, from the
strace -f -ttt -T -y logs bench/token-latency.sh's HOPS_OUT writes (PREFIX.runner,
PREFIX.fcgi, PREFIX.nginx, PREFIX.client; the reader's are its reads).

A delta "@ts<us>" is followed through:
  recv     the runner's first read of it from the provider (end of the call)
  commit   SQLite: the start of the runner's first commit signal after it (the pwrite
           of the DB-wake file, once the commit is durable); PostgreSQL: the start of
           the runner's first COMMIT sent after it (the commit's flush and its NOTIFY
           then fall in the next hop)
  durable  SQLite: the end of the last fdatasync of the -wal before that signal
  pool     the pool's first write of it (to nginx)
  nginx    nginx's first write of it (to the reader)
  client   the reader's first read of it (end of the call)
and for each hop the p50 / p90 / p99 / max in ms, the hops of the 1 % slowest deltas
(their mean), and the fdatasync durations of the runner in the same run. SQLite's
checkpoint (fsync or fdatasync of the database file itself, or its pwrites) is counted
where it falls between a delta's recv and its signal. Times are strace's (wall clock),
so every traced call is slowed: this is where the time goes, not how much there is."""
import re
import sys

LINE = re.compile(r'^(\d+)\s+(\d+\.\d+)\s+(.*)$')
DUR = re.compile(r'<(\d+\.\d+)>\s*$')
STAMP = re.compile(r'@ts(\d+)')
CALL = re.compile(r'^(?:<\.\.\. )?(\w+)(?: resumed>|\()')
FD = re.compile(r'^\w+\((\d+)<([^>]*)>')


def events(path):
    """(pid, start, end, call, fdpath, text) of each finished call."""
    pend = {}
    with open(path, errors='replace') as f:
        for ln in f:
            m = LINE.match(ln)
            if not m:
                continue
            pid, ts, rest = m.group(1), float(m.group(2)), m.group(3)
            if rest.endswith('<unfinished ...>'):
                pend[pid] = (ts, rest)
                continue
            d = DUR.search(rest)
            dur = float(d.group(1)) if d else 0.0
            if rest.startswith('<...'):
                st, head = pend.pop(pid, (ts - dur, ''))
                rest = head.replace('<unfinished ...>', '') + rest.split('resumed>', 1)[-1]
                start, end = st, st + dur
            else:
                start, end = ts, ts + dur
            c = CALL.match(rest)
            fdm = FD.match(rest)
            yield pid, start, end, c.group(1) if c else '?', fdm.group(2) if fdm else '', rest


def pct(v, p):
    if not v:
        return float('nan')
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p / 100))]


def first_of(path, want_calls, end_time=True):
    """stamp -> time of the first call in want_calls whose text carries it."""
    out = {}
    for pid, s, e, call, fd, text in events(path):
        if call not in want_calls:
            continue
        for st in STAMP.findall(text):
            k = int(st)
            t = e if end_time else s
            if k not in out or t < out[k]:
                out[k] = t
    return out


def print_syncs(pre, who):
    """The fdatasync/fsync durations in PREFIX.who, by file (-wal or not)."""
    rows = {}
    for pid, s, e, call, fd, text in events(pre + '.' + who):
        if call in ('fdatasync', 'fsync'):
            kind = 'WAL' if fd.endswith('-wal') or '/pg_wal/' in fd else 'other'
            rows.setdefault(kind, []).append((e - s) * 1000)
    for k, v in sorted(rows.items()):
        print('%s\'s %s syncs: %d calls, p50 %.2f p90 %.2f p99 %.2f max %.2f ms' % (
            who, k, len(v), pct(v, 50), pct(v, 90), pct(v, 99), max(v)))
    print()


def main():
    pre = sys.argv[1]
    import os
    for who in ('runner', 'postgres'):
        if os.path.exists(pre + '.' + who):
            print_syncs(pre, who)
    if not os.path.exists(pre + '.client'):
        return
    rd = {'read', 'readv', 'recvfrom', 'recvmsg'}
    wr = {'write', 'writev', 'sendto', 'sendmsg'}
    recv = first_of(pre + '.runner', rd)
    pool = first_of(pre + '.fcgi', wr, end_time=False)
    ngx = first_of(pre + '.nginx', wr, end_time=False)
    cli = first_of(pre + '.client', rd)
    signals, syncs, ckpt, pg_tx = [], [], [], []
    for pid, s, e, call, fd, text in events(pre + '.runner'):
        if call == 'pwrite64' and fd.endswith('-wake'):
            signals.append(s)
        elif call in ('fdatasync', 'fsync'):
            syncs.append((s, e, fd))
            if not fd.endswith('-wal'):
                ckpt.append((s, e))
        elif call == 'pwrite64' and (fd.endswith('.db') or fd.endswith('.sqlite')):
            ckpt.append((s, e))
        elif call in ('sendto', 'sendmsg') and 'COMMIT' in text.upper():
            pg_tx.append(s)
    signals.sort()
    syncs.sort()
    marks = signals or sorted(pg_tx)
    import bisect
    rows = []
    for k, cl in cli.items():
        t0 = k / 1e6
        r = recv.get(k)
        if r is None:
            continue
        i = bisect.bisect_left(marks, r)
        sig = marks[i] if i < len(marks) else None
        dur = None
        if sig is not None and signals:
            wal = [x for x in syncs if x[2].endswith('-wal') and x[1] <= sig and x[0] >= r - 0.0001]
            dur = wal[-1][1] if wal else None
        ck = sum(min(e, sig or e) - max(s, r) for s, e in ckpt if sig and e > r and s < sig)
        rows.append(dict(lat=cl - t0, recv=r - t0, commit=(sig - r) if sig else None,
                         fsync=(dur - r) if dur else None, wake=(pool.get(k, cl) - sig) if sig else None,
                         pool_nginx=(ngx.get(k, cl) - pool.get(k, cl)) if k in pool else None,
                         nginx_client=(cl - ngx[k]) if k in ngx else None, ckpt=ck))
    if not rows:
        print('hops: no delta followed through (%d stamps read, %d received)' % (len(cli), len(recv)))
        return
    pg = not signals
    hops = [('total', 'lat'), ('provider -> runner read', 'recv'),
            ('runner read -> COMMIT sent' if pg else 'runner read -> commit signal', 'commit'),
            ('  of it: read -> WAL fsync end', 'fsync'), ('  of it: checkpoint I/O inside', 'ckpt'),
            ('COMMIT sent -> pool write (flush, NOTIFY, read)' if pg else 'signal -> pool write', 'wake'), ('pool write -> nginx write', 'pool_nginx'),
            ('nginx write -> reader read', 'nginx_client')]
    print('| hop | p50 ms | p90 ms | p99 ms | max ms | mean of the slowest 1 % ms |')
    print('|---|---:|---:|---:|---:|---:|')
    slow = sorted(rows, key=lambda x: x['lat'])[-max(1, len(rows) // 100):]
    for name, key in hops:
        if pg and key in ('fsync', 'ckpt'):
            continue
        v = [x[key] * 1000 for x in rows if x[key] is not None]
        sv = [x[key] * 1000 for x in slow if x[key] is not None]
        print('| %s | %.2f | %.2f | %.2f | %.2f | %.2f |' % (name, pct(v, 50), pct(v, 90), pct(v, 99),
                                                        max(v) if v else float('nan'),
                                                        sum(sv) / len(sv) if sv else float('nan')))
    fs = [(e - s) * 1000 for s, e, fd in syncs if fd.endswith('-wal')]
    if fs:
        print('| (the runner\'s WAL fdatasync, %d calls) | %.2f | %.2f | %.2f | %.2f | |' % (
            len(fs), pct(fs, 50), pct(fs, 90), pct(fs, 99), max(fs)))
    cs = [(e - s) * 1000 for s, e, fd in syncs if not fd.endswith('-wal')]
    if cs:
        print('| (the runner\'s other syncs: checkpoints, %d calls) | %.2f | %.2f | %.2f | %.2f | |' % (
            len(cs), pct(cs, 50), pct(cs, 90), pct(cs, 99), max(cs)))
    print()
    print('%d deltas followed; the slowest: ' % len(rows) + '; '.join(
        ' '.join('%s=%.2f' % (k, v * 1000) for k, v in x.items() if v is not None) for x in slow[-5:]))


main()
