#!/bin/sh
# Rendered by ekco; ekco overwrites local changes.
# Kept for the documented habit of running /opt/ekco/shutdown.sh by hand before a reboot: it is
# `ekco shutdown` (see `ekco shutdown --help`).
exec /usr/bin/ekco shutdown "$@"
