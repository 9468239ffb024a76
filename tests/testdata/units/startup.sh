#!/bin/sh
# Rendered by ekco; ekco overwrites local changes.
# Kept for the documented habit of running /opt/ekco/startup.sh by hand before a reboot: it is
# `ekco startup` (see `ekco startup --help`).
exec /usr/bin/ekco startup "$@"
