# ekco: after erase ($1 = 0): what the agent created on this host (its units run the removed
# binary; ekco-reboot.service is not stopped: its stop job drains the node), its state and the
# timer's stamp.
if [ "$1" -eq 0 ]; then
  for f in ekco-reboot.service ekco-upgrade.service ekco-upgrade.timer \
           multi-user.target.wants/ekco-reboot.service timers.target.wants/ekco-upgrade.timer; do
    rm -f "/etc/systemd/system/$f"
  done
  rm -rf /var/lib/ekco /run/ekco
  rm -f /var/lib/systemd/timers/stamp-ekco-upgrade.timer
  rmdir /opt/ekco 2>/dev/null || true
fi
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null 2>&1 || true
  if [ "$1" -eq 0 ]; then
    systemctl reset-failed ekco-agent.service ekco-upgrade.service ekco-upgrade.timer >/dev/null 2>&1 || true
  fi
fi
exit 0
