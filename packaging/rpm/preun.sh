# ekco: before erase ($1 = 0) stop and disable the agent and stop ekco-upgrade.timer (postun
# deletes its files; ekco-reboot.service is never stopped); nothing on upgrade. Where systemd does
# not run, only disabled (the link post.sh made).
if [ "$1" -eq 0 ]; then
  if [ -d /run/systemd/system ]; then
    systemctl stop ekco-agent.service ekco-upgrade.timer >/dev/null 2>&1 || true
  fi
  if command -v systemctl >/dev/null 2>&1; then
    systemctl disable ekco-agent.service >/dev/null 2>&1 || true
  fi
fi
exit 0
