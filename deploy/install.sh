#!/usr/bin/env bash
# Install dstream as a system service on a Debian 12 server that runs nginx (as root):
#
#   make && deploy/install.sh
#
# `make install` (PREFIX=/usr/local) puts the programs, man pages, nginx snippets,
# systemd units and the example /etc/dstream in place; this adds what only a system
# install needs: the dstream user, its directories, the database, and the units
# enabled and started (dstream-fcgi.socket, dstream-fcgi, dstream-runner).
# Then add to your server { }:  include /usr/local/share/dstream/nginx/dstream.conf;
#                               include /usr/local/share/dstream/nginx/dstream-errors.conf;
#                               include /usr/local/share/dstream/nginx/dstream-metrics.conf;  (optional)
# and to http { }: upstream dstream { zone dstream 64k; server unix:/run/dstream/fcgi.sock max_conns=16416; }
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
[ "$(id -u)" = 0 ] || { echo "install.sh: run as root" >&2; exit 1; }
make -C "$here" --no-print-directory install PREFIX=/usr/local DESTDIR= B="${B:-build}"
id dstream >/dev/null 2>&1 || useradd --system --home /var/lib/dstream --shell /usr/sbin/nologin dstream
install -d -o dstream -g dstream -m 0750 /var/lib/dstream
chown root:dstream /etc/dstream
chmod 0750 /etc/dstream
chgrp dstream /etc/dstream/* 2>/dev/null || true
chown dstream:dstream /etc/dstream/credentials.json
chmod 0600 /etc/dstream/credentials.json
runuser -u dstream -- env DSTREAM_DB=/var/lib/dstream/dstream.db /usr/local/bin/dstream migrate
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload
    systemctl enable --now dstream-fcgi.socket dstream-fcgi.service dstream-runner.service
    echo "installed and started; add the nginx snippets (see the top of this script) and reload nginx"
else
    echo "installed; systemd is not running here: start dstream-fcgi and dstream-runner yourself"
fi
