# ekco: before erase ($1 = 0) stop and disable the agent and stop ekco-upgrade.timer (postun
# deletes its files; ekco-reboot.service is never stopped); nothing on upgrade.
if [ "$1" -eq 0 ] && [ -d /run/systemd/system ]; then
  systemctl stop ekco-agent.service ekco-upgrade.timer >/dev/null 2>&1 || true
  systemctl disable ekco-agent.service >/dev/null 2>&1 || true
fi
exit 0
