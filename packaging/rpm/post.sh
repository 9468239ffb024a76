# ekco: after install or upgrade ($1 = 1 install, 2 upgrade). On install enabled, not started;
# on upgrade a running agent is restarted (try-restart), so the new binary runs. ekco-reboot.service
# is never touched: its stop job drains the node.
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null 2>&1 || true
  if [ "$1" -eq 1 ]; then
    systemctl enable ekco-agent.service >/dev/null 2>&1 || true
  else
    systemctl try-restart ekco-agent.service >/dev/null 2>&1 || true
  fi
fi
exit 0
