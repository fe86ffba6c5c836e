#!/usr/bin/env bash
# `make install` and `make uninstall`: copy the built tree into place (or remove it).
#
#   PREFIX=/usr/local DESTDIR= B=build deploy/install-tree.sh install|uninstall
#
# PREFIX/bin            dstream, dstream-fcgi, dstream-runner
# PREFIX/share/dstream  nginx/ snippets, web/ (if present), examples/etc/
# PREFIX/share/man      dstream.1, dstream-fcgi.8, dstream-runner.8
# UNITDIR               systemd units, their paths rewritten for PREFIX and SYSCONFDIR
#                       (default PREFIX/lib/systemd/system, which systemd searches
#                       for /usr/local and /usr)
# SYSCONFDIR/dstream    the example configuration, only where no file is there yet
#                       (SYSCONFDIR: /etc for PREFIX /usr or /usr/local, else PREFIX/etc)
# Everything lands under DESTDIR (empty: the live system). uninstall removes the
# programs, shared files, man pages and units; configuration and data stay.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
action=${1:-install}
B=${B:-build}
PREFIX=${PREFIX:-/usr/local}
DESTDIR=${DESTDIR:-}
case $PREFIX in
/usr | /usr/local) def_sysconf=/etc ;;
*) def_sysconf=$PREFIX/etc ;;
esac
SYSCONFDIR=${SYSCONFDIR:-$def_sysconf}
UNITDIR=${UNITDIR:-$PREFIX/lib/systemd/system}
BINDIR=$PREFIX/bin
SHAREDIR=$PREFIX/share/dstream
MANDIR=$PREFIX/share/man

bins=(dstream dstream-fcgi dstream-runner)
units=(dstream-fcgi.socket dstream-fcgi.service dstream-runner.service)
mans=(man1/dstream.1 man8/dstream-fcgi.8 man8/dstream-runner.8)

if [ "$action" = uninstall ]; then
    for b in "${bins[@]}"; do rm -f "$DESTDIR$BINDIR/$b"; done
    for u in "${units[@]}"; do rm -f "$DESTDIR$UNITDIR/$u"; done
    for m in "${mans[@]}"; do rm -f "$DESTDIR$MANDIR/$m"; done
    rm -rf "$DESTDIR$SHAREDIR"
    echo "uninstalled from $DESTDIR$PREFIX; kept $DESTDIR$SYSCONFDIR/dstream and the database"
    exit 0
fi
[ "$action" = install ] || { echo "usage: $0 install|uninstall" >&2; exit 2; }

for b in "${bins[@]}"; do
    [ -x "$here/$B/$b" ] || { echo "install: build first (make)" >&2; exit 1; }
done
install -d "$DESTDIR$BINDIR" "$DESTDIR$SHAREDIR/nginx" "$DESTDIR$SHAREDIR/examples/etc" \
    "$DESTDIR$UNITDIR" "$DESTDIR$MANDIR/man1" "$DESTDIR$MANDIR/man8"
for b in "${bins[@]}"; do install -m 0755 "$here/$B/$b" "$DESTDIR$BINDIR/$b"; done
install -m 0644 "$here"/nginx/*.conf "$DESTDIR$SHAREDIR/nginx/"
if [ -d "$here/web" ]; then
    rm -rf "$DESTDIR$SHAREDIR/web"
    cp -R "$here/web" "$DESTDIR$SHAREDIR/web"
    chmod -R u=rwX,go=rX "$DESTDIR$SHAREDIR/web"
fi
for m in "${mans[@]}"; do install -m 0644 "$here/deploy/man/${m#*/}" "$DESTDIR$MANDIR/$m"; done
# Units name the installed paths.
for u in "${units[@]}"; do
    sed -e "s#/usr/local/bin/#$BINDIR/#g" -e "s#/etc/dstream/#$SYSCONFDIR/dstream/#g" \
        "$here/deploy/$u" >"$DESTDIR$UNITDIR/$u"
    chmod 0644 "$DESTDIR$UNITDIR/$u"
done
# Example configuration: always under share/, and in SYSCONFDIR/dstream only where
# the operator has no file of that name (configuration is never overwritten).
install -d -m 0750 "$DESTDIR$SYSCONFDIR/dstream"
for f in "$here"/deploy/etc/*; do
    n=$(basename "$f")
    install -m 0644 "$f" "$DESTDIR$SHAREDIR/examples/etc/$n"
    [ -e "$DESTDIR$SYSCONFDIR/dstream/$n" ] && continue
    case $n in
    credentials.json | *.key) mode=0600 ;;   # secrets: the owner only
    *) mode=0640 ;;
    esac
    install -m "$mode" "$f" "$DESTDIR$SYSCONFDIR/dstream/$n"
done
echo "installed into $DESTDIR$PREFIX (units in $DESTDIR$UNITDIR, configuration in $DESTDIR$SYSCONFDIR/dstream)"
