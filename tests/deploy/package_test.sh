#!/usr/bin/env bash
# The Debian package end to end, on this machine (ctest deploy_package, label
# deploy): build the .deb from BUILD_DIR with cpack, install it, check files,
# user, conffile and maintainer-script actions, upgrade over itself and to a
# newer revision (config and data kept, the service restarted once, never
# stopped), remove, purge; lintian. Needs root and dpkg; exits 77 (skipped)
# with the reason otherwise. No systemd runs here, so a fake deb-systemd-invoke
# on PATH records what the maintainer scripts ask systemd to do.
#
# usage: tests/deploy/package_test.sh --build-dir DIR [--keep]
set -euo pipefail

build_dir=""
keep=0
while (($#)); do
  case "$1" in
    --build-dir) build_dir=$2; shift ;;
    --keep) keep=1 ;;
    *) echo "package_test: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
[[ -n "$build_dir" ]] || { echo "package_test: --build-dir is required" >&2; exit 2; }
build_dir=$(cd "$build_dir" && pwd)

skip() { echo "SKIPPED: $*"; exit 77; }
[[ $(id -u) -eq 0 ]] || skip "needs root (installs and purges the package on this machine)"
for tool in dpkg dpkg-deb cpack adduser; do
  command -v "$tool" >/dev/null || skip "$tool not found (scripts/setup installs it)"
done
[[ -f "$build_dir/CPackConfig.cmake" ]] || skip "$build_dir has no CPackConfig.cmake (configure it first)"
for f in agent/meshagent meshctl/meshctl deploy/meshagent.1.gz deploy/meshctl.1.gz; do
  [[ -e "$build_dir/$f" ]] || skip "$build_dir/$f is not built (cmake --build $build_dir --target meshagent meshctl package_files)"
done
if dpkg-query -W -f='${Status}' meshagent 2>/dev/null | grep -q "install ok installed"; then
  maintainer=$(dpkg-query -W -f='${Maintainer}' meshagent)
  [[ "$maintainer" == "meshagent developers"* ]] || skip "a foreign meshagent package is installed ($maintainer)"
  echo "removing a meshagent package left by an earlier run"
  dpkg -P meshagent >/dev/null
fi

work=$(mktemp -d /tmp/meshagent-package-test.XXXXXX)
cleanup() {
  if ((keep == 0)); then
    dpkg -P meshagent >/dev/null 2>&1 || true
    rm -rf "$work"
  fi
}
trap cleanup EXIT

failures=0
checks=0
check() {  # check DESCRIPTION COMMAND...
  local what=$1
  shift
  checks=$((checks + 1))
  if "$@" >/dev/null 2>&1; then
    echo "ok   $what"
  else
    echo "FAIL $what"
    failures=$((failures + 1))
  fi
}

step() { printf '\n== %s\n' "$*"; }

step "build: cpack from $build_dir (revisions 1 and 2)"
cpack --config "$build_dir/CPackConfig.cmake" -B "$work/r1" >"$work/cpack1.log" 2>&1 || { cat "$work/cpack1.log"; exit 1; }
cpack --config "$build_dir/CPackConfig.cmake" -B "$work/r2" -D CPACK_DEBIAN_PACKAGE_RELEASE=2 >"$work/cpack2.log" 2>&1 ||
  { cat "$work/cpack2.log"; exit 1; }
deb1=$(ls "$work"/r1/meshagent_*.deb)
deb2=$(ls "$work"/r2/meshagent_*.deb)
echo "$(basename "$deb1"): $(stat -c %s "$deb1") bytes; installed size $(dpkg-deb -f "$deb1" Installed-Size) KiB"
echo "Depends: $(dpkg-deb -f "$deb1" Depends)"

# Fake systemd front ends: record each request.
mkdir -p "$work/fake"
for tool in deb-systemd-invoke; do
  cat >"$work/fake/$tool" <<FAKE
#!/bin/sh
echo "$tool \$*" >>"$work/systemd.log"
FAKE
  chmod +x "$work/fake/$tool"
done
: >"$work/systemd.log"
export PATH="$work/fake:$PATH"
actions() { cat "$work/systemd.log"; : >"$work/systemd.log"; }

step "install"
dpkg -i "$deb1" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; exit 1; }
log=$(actions)
echo "$log" | sed 's/^/  systemd: /'
check "postinst asks systemd to start meshagent.service" grep -qx "deb-systemd-invoke start meshagent.service" <<<"$log"
check "/usr/bin/meshagent runs" /usr/bin/meshagent --version
check "/usr/bin/meshctl runs" /usr/bin/meshctl --help
check "man pages meshagent(1), meshctl(1)" test -s /usr/share/man/man1/meshagent.1.gz -a -s /usr/share/man/man1/meshctl.1.gz
if command -v groff >/dev/null; then
  for page in meshagent meshctl; do
    check "man page $page(1) renders without groff warnings" bash -c \
      "! (zcat /usr/share/man/man1/$page.1.gz | LC_ALL=C.UTF-8 groff -man -Tutf8 -ww -z 2>&1 | grep .)"
  done
fi
check "/etc/meshagent/agent.toml is a conffile" bash -c "dpkg-query -W -f='\${Conffiles}' meshagent | grep -q /etc/meshagent/agent.toml"
check "meshagent.service enabled (deb-systemd-helper)" test -L /etc/systemd/system/multi-user.target.wants/meshagent.service
check "the Prometheus timer is not enabled" test ! -e /etc/systemd/system/timers.target.wants/meshagent-prometheus.timer
check "systemd units installed" test -f /lib/systemd/system/meshagent.service -a -f /lib/systemd/system/meshagent-prometheus.timer
check "Prometheus textfile writer installed" test -x /usr/libexec/meshagent/prometheus-textfile
check "meshagent system user" bash -c 'u=$(getent passwd meshagent) && [ "$(echo "$u" | cut -d: -f3)" -lt 1000 ] && echo "$u" | grep -q ":/var/lib/meshagent:/usr/sbin/nologin$"'
check "meshagent group is the user's primary group" bash -c '[ "$(id -gn meshagent)" = meshagent ]'
check "/var/lib/meshagent owned by meshagent, mode 750" bash -c '[ "$(stat -c %U:%G:%a /var/lib/meshagent)" = meshagent:meshagent:750 ]'
check "the shipped config is valid but for the key" bash -c \
  '/usr/bin/meshagent --check-config /etc/meshagent/agent.toml 2>&1 | grep -q "mesh_key_file"'
if command -v systemd-analyze >/dev/null; then
  check "systemd-analyze verify meshagent.service" systemd-analyze verify /lib/systemd/system/meshagent.service
  check "systemd-analyze verify meshagent-prometheus.{service,timer}" systemd-analyze verify \
    /lib/systemd/system/meshagent-prometheus.service /lib/systemd/system/meshagent-prometheus.timer
  score=$(systemd-analyze security --offline=true /lib/systemd/system/meshagent.service 2>/dev/null |
    sed -n 's/.*Overall exposure level for meshagent.service: \([0-9.]*\) \([A-Z]*\).*/\1 \2/p')
  echo "  systemd-analyze security: $score"
  check "systemd-analyze security rates meshagent.service OK or better (< 3.0)" \
    awk -v s="${score%% *}" 'BEGIN { exit !(s != "" && s < 3.0) }'
fi

step "the operator configures the node"
echo '# edited by the operator' >>/etc/meshagent/agent.toml
openssl rand -hex 32 >/etc/meshagent/mesh.key 2>/dev/null || head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >/etc/meshagent/mesh.key
chown meshagent:meshagent /etc/meshagent/mesh.key
chmod 644 /etc/meshagent/mesh.key
check "a key readable by others is refused, with the fix" bash -c \
  '/usr/bin/meshagent --check-config /etc/meshagent/agent.toml 2>&1 | grep -q "Fix: chmod 600 /etc/meshagent/mesh.key"'
check "a key readable by others fails --check-config (exit 2)" bash -c \
  '/usr/bin/meshagent --check-config /etc/meshagent/agent.toml >/dev/null 2>&1; [ $? -eq 2 ]'
chmod 600 /etc/meshagent/mesh.key
check "with the key at 0600 the config checks ok" /usr/bin/meshagent --check-config /etc/meshagent/agent.toml
echo "state" >/var/lib/meshagent/marker
chown meshagent:meshagent /var/lib/meshagent/marker
config_sum=$(md5sum </etc/meshagent/agent.toml)

for upgrade in "$deb1" "$deb2"; do
  step "upgrade to $(basename "$upgrade")"
  dpkg -i "$upgrade" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; exit 1; }
  log=$(actions)
  echo "$log" | sed 's/^/  systemd: /'
  check "restarted exactly once" bash -c "[ \$(grep -c 'restart meshagent.service' <<<'$log') -eq 1 ]"
  check "never stopped" bash -c "! grep -q 'stop meshagent.service' <<<'$log'"
  check "edited config kept" bash -c "[ \"\$(md5sum </etc/meshagent/agent.toml)\" = '$config_sum' ]"
  check "no .dpkg-dist/.dpkg-new config left" bash -c '! ls /etc/meshagent/*.dpkg-* 2>/dev/null | grep -q .'
  check "mesh key kept (0600, meshagent)" bash -c '[ "$(stat -c %U:%a /etc/meshagent/mesh.key)" = meshagent:600 ]'
  check "data kept" grep -qx state /var/lib/meshagent/marker
done
check "version is the new revision" bash -c "[ \"\$(dpkg-query -W -f='\${Version}' meshagent)\" = '$(dpkg-deb -f "$deb2" Version)' ]"

step "remove"
dpkg -r meshagent >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; exit 1; }
log=$(actions)
echo "$log" | sed 's/^/  systemd: /'
check "prerm stops meshagent.service" grep -q "stop meshagent.service" <<<"$log"
check "binaries gone" test ! -e /usr/bin/meshagent -a ! -e /usr/bin/meshctl
check "config and data kept until purge" test -f /etc/meshagent/agent.toml -a -f /var/lib/meshagent/marker

step "purge"
dpkg -P meshagent >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; exit 1; }
check "/etc/meshagent gone (config and key)" test ! -e /etc/meshagent
check "/var/lib/meshagent gone" test ! -e /var/lib/meshagent
check "no unit left" test ! -e /lib/systemd/system/meshagent.service
check "no enablement symlink left" test ! -e /etc/systemd/system/multi-user.target.wants/meshagent.service
check "dpkg forgot the package" bash -c '! dpkg-query -W -f="\${Status}" meshagent 2>/dev/null | grep -q installed'
echo "  (the meshagent user and group stay, as Debian does for system users)"

step "lintian"
if command -v lintian >/dev/null; then
  # Tags accepted, each explained in deploy/README.md.
  allowed='initial-upload-closes-no-bugs'
  lintian --allow-root --tag-display-limit 0 "$deb1" >"$work/lintian.log" 2>&1 || true
  sed 's/^/  /' "$work/lintian.log"
  check "lintian: no error or warning beyond the explained ones" bash -c \
    "! grep -E '^[EW]: ' '$work/lintian.log' | grep -vE ' ($allowed)( |$)' | grep -q ."
else
  echo "lintian not installed: lintian step skipped (scripts/setup installs it)"
fi

echo
echo "package: $((checks - failures)) passed, $failures failed"
((failures == 0))
