# ekco: after install or upgrade ($1 = 1 install, 2 upgrade). Enabled, not started.
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null 2>&1 || true
  if [ "$1" -eq 1 ]; then systemctl enable ekco-agent.service >/dev/null 2>&1 || true; fi
fi
exit 0
