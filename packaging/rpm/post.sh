# ekco: after install or upgrade ($1 = 1 install, 2 upgrade). On install enabled, not started,
# also where systemd does not run (a chroot, an image build, rpm --root: `systemctl enable` only
# writes the link); on upgrade a running agent is restarted (try-restart), so the new binary runs.
# ekco-reboot.service is never touched: its stop job drains the node.
running=false
if [ -d /run/systemd/system ]; then running=true; fi
if $running; then systemctl daemon-reload >/dev/null 2>&1 || true; fi
if [ "$1" -eq 1 ]; then
  if command -v systemctl >/dev/null 2>&1; then
    systemctl enable ekco-agent.service >/dev/null 2>&1 || true
  fi
elif $running; then
  systemctl try-restart ekco-agent.service >/dev/null 2>&1 || true
fi
exit 0
