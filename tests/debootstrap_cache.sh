# Sourced by tests/nspawn/run and tests/userland/run: a Debian root made with debootstrap once
# per suite and package list, kept as a tarball, so each run unpacks a fresh copy in seconds.
#   debootstrap_cached WHO SUITE INCLUDE CACHE_DIR
# sets rootfs_tarball to CACHE_DIR/SUITE-<hash of INCLUDE>.tar, debootstrapping it first (minbase
# plus INCLUDE, from this machine's Debian mirror) when it is not there. WHO prefixes messages.
debootstrap_cached() {
  local who=$1 suite=$2 include=$3 cache=$4 mirror boot
  rootfs_tarball=$cache/$suite-$(echo "$include" | sha256sum | cut -c1-12).tar
  [ -f "$rootfs_tarball" ] && return 0
  mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -1 || true)
  [ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $3 == "bookworm" {print $2; exit}' /etc/apt/sources.list 2>/dev/null)
  [ -n "$mirror" ] || mirror=http://deb.debian.org/debian
  mkdir -p "$cache"
  boot=$(mktemp -d "$cache/debootstrap.XXXXXX")
  echo "$who: debootstrap $suite from $mirror (once; cached in $rootfs_tarball)"
  debootstrap --variant=minbase --include="$include" "$suite" "$boot/rootfs" "$mirror" \
    >"$boot/log" 2>&1 || { tail -20 "$boot/log" >&2; rm -rf "$boot"; exit 1; }
  tar --numeric-owner -C "$boot/rootfs" -cf "$boot/rootfs.tar" .
  mv "$boot/rootfs.tar" "$rootfs_tarball"
  rm -rf "$boot"
}
