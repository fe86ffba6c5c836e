#!/usr/bin/env bash
# Install dstream on a Debian 12 server that already runs nginx (as root):
#   make && deploy/install.sh
# Binaries go to /usr/local/bin, the nginx snippets to /usr/share/dstream/nginx, the
# systemd units to /etc/systemd/system; the database lives in /var/lib/dstream.
# Then add to your server { }:  include /usr/share/dstream/nginx/dstream.conf;
#                               include /usr/share/dstream/nginx/dstream-errors.conf;
#                               include /usr/share/dstream/nginx/dstream-metrics.conf;  (optional)
# and to http { }: upstream dstream { zone dstream 64k; server unix:/run/dstream/fcgi.sock max_conns=16416; }
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
B=${B:-build}
[ "$(id -u)" = 0 ] || { echo "install.sh: run as root" >&2; exit 1; }
for f in dstream-fcgi dstream-runner dstream; do
    [ -x "$here/$B/$f" ] || { echo "install.sh: build first (make)" >&2; exit 1; }
done
id dstream >/dev/null 2>&1 || useradd --system --home /var/lib/dstream --shell /usr/sbin/nologin dstream
install -d -o dstream -g dstream -m 0750 /var/lib/dstream
install -d -m 0750 -o root -g dstream /etc/dstream
install -m 0755 "$here/$B/dstream-fcgi" "$here/$B/dstream-runner" "$here/$B/dstream" /usr/local/bin/
install -d /usr/share/dstream/nginx
install -m 0644 "$here/nginx/dstream.conf" "$here/nginx/dstream-errors.conf" "$here/nginx/dstream-metrics.conf" "$here/nginx/example.conf" \
    /usr/share/dstream/nginx/
install -m 0644 "$here/deploy/dstream-fcgi.service" "$here/deploy/dstream-runner.service" /etc/systemd/system/
if [ ! -f /etc/dstream/credentials.json ]; then
    umask 077
    echo '{}' > /etc/dstream/credentials.json
    chown dstream:dstream /etc/dstream/credentials.json
fi
sudo -u dstream DSTREAM_DB=/var/lib/dstream/dstream.db /usr/local/bin/dstream migrate
systemctl daemon-reload
systemctl enable --now dstream-fcgi dstream-runner
echo "installed; add the nginx snippets (see the top of this script) and reload nginx"
