#!/bin/sh
# The configuration comes from hintbox in an environment variable (no host file to bind, so it
# works the same when hintbox itself runs in a container); /tmp is the container's tmpfs.
set -eu
: "${HINTBOX_SQUID_CONF:?hintbox gives the configuration in HINTBOX_SQUID_CONF}"
printf '%s\n' "$HINTBOX_SQUID_CONF" > /tmp/squid.conf
squid -k parse -f /tmp/squid.conf 2>/tmp/parse.log || { cat /tmp/parse.log >&2; exit 1; }
exec squid -N -f /tmp/squid.conf
