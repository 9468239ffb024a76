# ekco: after erase ($1 = 0): what the agent created on this host (its units run the removed
# binary; they are not stopped: ekco-reboot.service's stop job drains the node).
if [ "$1" -eq 0 ]; then
  for f in ekco-reboot.service ekco-upgrade.service ekco-upgrade.timer \
           multi-user.target.wants/ekco-reboot.service timers.target.wants/ekco-upgrade.timer; do
    rm -f "/etc/systemd/system/$f"
  done
  rm -rf /var/lib/ekco /run/ekco
  rmdir /opt/ekco 2>/dev/null || true
fi
if [ -d /run/systemd/system ]; then systemctl daemon-reload >/dev/null 2>&1 || true; fi
exit 0
