#!/usr/bin/env bash
# deploy/ansible end to end (ctest deploy_ansible, label deploy; root).
#
# Three hosts that look separate to Ansible: each is a network namespace
# (its own eth0 10.77.0.N/24 on a bridge in a controller namespace) plus a
# mount namespace whose /etc, /usr and /var are overlays on this machine's
# (writes stay per host: dpkg's database, /etc/passwd, the installed files)
# and whose /run is its own tmpfs; each runs its own sshd, with its own host
# keys and hostname. ansible-playbook runs in the controller namespace and
# reaches them over ssh as a lab controller reaches Pis.
#
# No systemd runs here, so the role runs with meshagent_service_manager=direct:
# the same tasks, but the start/restart steps use start-stop-daemon as the
# meshagent user instead of systemctl (the agent's OLSR port is set above
# 1024 because nothing grants CAP_NET_BIND_SERVICE without systemd).
#
# Checks: first run installs, configures and starts the agents; they form a
# mesh (meshctl members on every host lists all three alive); the second run
# reports changed=0; --check --diff with a changed setting shows the diff and
# changes nothing; a broken inventory value (agent_port = 70000) fails at
# --check-config on the first node and leaves every running agent and config
# untouched; a real change restarts the agents one at a time.
# Runs only with MESH_ANSIBLE=1 (it takes minutes); exits 77 (skipped) with the
# reason otherwise, or when not root or a tool is missing.
set -euo pipefail

build_dir=""
keep=0
while (($#)); do
  case "$1" in
    --build-dir) build_dir=$2; shift ;;
    --keep) keep=1 ;;
    *) echo "ansible_e2e_test: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
[[ -n "$build_dir" ]] || { echo "--build-dir is required" >&2; exit 2; }
build_dir=$(cd "$build_dir" && pwd)
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

skip() { echo "SKIPPED: $*"; exit 77; }
[[ "${MESH_ANSIBLE:-0}" == 1 ]] ||
  skip "set MESH_ANSIBLE=1 to run the Ansible end-to-end test (3 ssh hosts in namespaces, ~4-7 min; needs scripts/setup --ansible)"
[[ $(id -u) -eq 0 ]] || skip "needs root (network and mount namespaces, sshd)"
for tool in ansible-playbook ansible-vault ssh ssh-keygen ip unshare nsenter cpack start-stop-daemon; do
  command -v "$tool" >/dev/null || skip "$tool not found (scripts/setup --ansible installs it)"
done
[[ -x /usr/sbin/sshd ]] || skip "sshd not found (scripts/setup --ansible installs openssh-server)"
/usr/bin/python3 -c 'import apt' 2>/dev/null || skip "python3-apt missing (scripts/setup --ansible)"
probe="ma-probe-$$"
ip netns add "$probe" 2>/dev/null || skip "cannot create network namespaces here"
ip netns del "$probe"
[[ -e "$build_dir/deploy/meshagent.1.gz" ]] || skip "$build_dir: the package files are not built"

work=$(mktemp -d /srv/meshagent-ansible-test.XXXXXX 2>/dev/null || mktemp -d /var/tmp/meshagent-ansible-test.XXXXXX)
ctl=ma-ctl-$$
hosts=(h1 h2 h3)
declare -A host_pid
# Everything this test started lives in its namespaces: sshd, its sessions,
# the agents, ansible's ssh control masters. End exactly those processes.
kill_namespace() {
  local pids
  pids=$(ip netns pids "$1" 2>/dev/null)
  [[ -n "$pids" ]] && kill $pids 2>/dev/null
  sleep 0.5
  pids=$(ip netns pids "$1" 2>/dev/null)
  [[ -n "$pids" ]] && kill -9 $pids 2>/dev/null
  ip netns del "$1" 2>/dev/null
}
cleanup() {
  set +e
  for h in "${hosts[@]}"; do kill_namespace "ma-$h-$$"; done
  kill_namespace "$ctl"
  if ((keep == 0)); then rm -rf "$work"; else echo "kept $work"; fi
}
trap cleanup EXIT

failures=0
checks=0
check() {
  local what=$1
  shift
  checks=$((checks + 1))
  if "$@" >/dev/null 2>&1; then echo "ok   $what"; else echo "FAIL $what"; failures=$((failures + 1)); fi
}
step() { printf '\n== [%4ss] %s\n' "$SECONDS" "$*"; }

step "package"
cpack --config "$build_dir/CPackConfig.cmake" -B "$work/pkg" >"$work/cpack.log" 2>&1 || { cat "$work/cpack.log"; exit 1; }
deb=$(ls "$work"/pkg/meshagent_*.deb)
echo "$deb"

step "hosts: 3 network + mount namespaces with their own sshd"
ssh-keygen -q -t ed25519 -N "" -f "$work/id_ed25519"
cp "$work/id_ed25519.pub" "$work/authorized_keys"
ip netns add "$ctl"
ip -n "$ctl" link set lo up
ip -n "$ctl" link add br0 type bridge
ip -n "$ctl" addr add 10.77.0.254/24 dev br0
ip -n "$ctl" link set br0 up
n=0
for h in "${hosts[@]}"; do
  n=$((n + 1))
  ns="ma-$h-$$"
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip -n "$ctl" link add "v$h" type veth peer name eth0 netns "$ns"
  ip -n "$ctl" link set "v$h" master br0 up
  ip -n "$ns" addr add "10.77.0.$n/24" brd + dev eth0
  ip -n "$ns" link set eth0 up
  root="$work/hosts/$h"
  for d in etc usr var; do mkdir -p "$root/upper/$d" "$root/work/$d"; done
  ip netns exec "$ns" unshare --mount --uts --propagation private sh -c "
    set -e
    for d in etc usr var; do
      mount -t overlay overlay -o lowerdir=/\$d,upperdir=$root/upper/\$d,workdir=$root/work/\$d /\$d
    done
    mount -t tmpfs -o mode=0755 tmpfs /run
    mkdir -p /run/sshd /run/lock
    hostname $h
    rm -f /etc/ssh/ssh_host_*
    ssh-keygen -q -A
    exec /usr/sbin/sshd -D -e -o ListenAddress=10.77.0.$n -o PermitRootLogin=prohibit-password \
      -o AuthorizedKeysFile=$work/authorized_keys -o PidFile=/run/sshd.pid -o UsePAM=no \
      -o StrictModes=no
  " >"$work/sshd-$h.log" 2>&1 &
  host_pid[$h]=$!
done
for h in "${hosts[@]}"; do
  for _ in $(seq 50); do
    grep -q "Server listening" "$work/sshd-$h.log" 2>/dev/null && break
    sleep 0.2
  done
  grep -q "Server listening" "$work/sshd-$h.log" || { cat "$work/sshd-$h.log"; exit 1; }
done
echo "sshd up on 10.77.0.1-3"

# The inventory: the lab example's shape, with this test's addresses.
inv="$work/inventory"
mkdir -p "$inv/group_vars/mesh"
{
  echo "all:"
  echo "  children:"
  echo "    mesh:"
  echo "      hosts:"
  n=0
  for h in "${hosts[@]}"; do
    n=$((n + 1))
    echo "        $h: {ansible_host: 10.77.0.$n, meshagent_node_address: 10.77.0.$n, meshagent_location: [$n.0, 0.0, 0.0]}"
  done
  cat <<VARS
      vars:
        ansible_user: root
        ansible_ssh_private_key_file: $work/id_ed25519
        ansible_ssh_common_args: -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null
        ansible_python_interpreter: /usr/bin/python3
        meshagent_package: $deb
        meshagent_interfaces: [eth0]
        meshagent_olsr_port: 6981
        meshagent_service_manager: direct
        meshagent_health_delay: 1
        meshagent_kgroup: {k: 3}
        meshagent_routing: {hello_interval_ms: 1000}
VARS
} >"$inv/hosts.yml"
echo "vault_meshagent_mesh_key: \"$(openssl rand -hex 32)\"" >"$inv/group_vars/mesh/vault.yml"
echo "test-vault-password" >"$work/vault-pass"
ansible-vault encrypt --vault-password-file "$work/vault-pass" "$inv/group_vars/mesh/vault.yml" >/dev/null
check "the mesh key is vault-encrypted" grep -q '^\$ANSIBLE_VAULT' "$inv/group_vars/mesh/vault.yml"

export ANSIBLE_CONFIG="$repo/deploy/ansible/ansible.cfg" ANSIBLE_FORCE_COLOR=0 ANSIBLE_NOCOLOR=1
export ANSIBLE_LOCAL_TEMP="$work/ansible-local" ANSIBLE_REMOTE_TEMP=/run/ansible-tmp
export ANSIBLE_SSH_CONTROL_PATH_DIR="$work/cp"
playbook() {  # playbook LOG ARGS...
  local log=$1
  shift
  ip netns exec "$ctl" ansible-playbook -i "$inv/hosts.yml" --vault-password-file "$work/vault-pass" \
    "$repo/deploy/ansible/site.yml" "$@" >"$log" 2>&1
}
recap() { sed -n '/PLAY RECAP/,$p' "$1"; }
changed_total() { recap "$1" | grep -o 'changed=[0-9]*' | cut -d= -f2 | awk '{ s += $1 } END { print s + 0 }'; }
on() {  # on HOST CMD...: run in the host's namespaces
  local h=$1
  shift
  nsenter -t "${host_pid[$h]}" -m -n -u "$@"
}
agent_pid() { on "$1" cat /run/meshagent/meshagent.pid 2>/dev/null || echo none; }
members_alive() {  # members_alive HOST: sorted names listed alive
  on "$1" meshctl --json members 2>/dev/null |
    python3 -c 'import json,sys; print(" ".join(sorted(m["name"] for m in json.load(sys.stdin)["members"] if m.get("state")=="alive")))'
}

step "first run: install, configure, start, one node at a time"
if ! playbook "$work/run1.log"; then cat "$work/run1.log"; exit 1; fi
recap "$work/run1.log"
for h in "${hosts[@]}"; do
  check "$h: meshagent installed (its own dpkg database)" on "$h" dpkg-query -W meshagent
  check "$h: mesh key 0600 meshagent" bash -c "[ \"\$(nsenter -t ${host_pid[$h]} -m stat -c %U:%a /etc/meshagent/mesh.key)\" = meshagent:600 ]"
  # By uid: the meshagent user exists only in the host's own /etc, so ps
  # out here would print a bare number (or another name for that uid).
  check "$h: agent running as meshagent" bash -c "[ \"\$(ps -o uid= -p \$(nsenter -t ${host_pid[$h]} -m cat /run/meshagent/meshagent.pid) | tr -d ' ')\" = \"\$(nsenter -t ${host_pid[$h]} -m id -u meshagent)\" ]"
done
check "this machine itself has no meshagent installed by the test" bash -c '! dpkg-query -W -f="\${Status}" meshagent 2>/dev/null | grep -q "ok installed"'
for h in "${hosts[@]}"; do
  ok=0
  for _ in $(seq 60); do
    [[ "$(members_alive "$h")" == "h1 h2 h3" ]] && { ok=1; break; }
    sleep 1
  done
  echo "  $h members alive: $(members_alive "$h")"
  check "$h: meshctl members lists h1 h2 h3 alive" test "$ok" = 1
done
declare -A pid_before
for h in "${hosts[@]}"; do pid_before[$h]=$(agent_pid "$h"); done

step "second run: nothing to change"
if ! playbook "$work/run2.log"; then cat "$work/run2.log"; exit 1; fi
recap "$work/run2.log"
check "second run: changed=0 on every host" test "$(changed_total "$work/run2.log")" = 0
for h in "${hosts[@]}"; do check "$h: agent not restarted" test "$(agent_pid "$h")" = "${pid_before[$h]}"; done

step "--check --diff with a new log level: diff shown, nothing changed"
sum_before=$(on h1 md5sum /etc/meshagent/agent.toml)
if ! playbook "$work/check.log" --check --diff -e meshagent_log_level=debug; then cat "$work/check.log"; exit 1; fi
recap "$work/check.log"
check "--check --diff shows the config change" grep -q '^+level = "debug"' "$work/check.log"
check "--check changed nothing on h1" test "$(on h1 md5sum /etc/meshagent/agent.toml)" = "$sum_before"
for h in "${hosts[@]}"; do check "$h: agent not restarted by --check" test "$(agent_pid "$h")" = "${pid_before[$h]}"; done

step "a broken inventory value: agent_port = 70000"
if playbook "$work/broken.log" -e meshagent_agent_port=70000; then
  echo "FAIL the playbook succeeded with agent_port = 70000"
  failures=$((failures + 1))
fi
grep -E 'failed to validate|agent_port' "$work/broken.log" | head -3 | sed 's/^/  /'
recap "$work/broken.log"
check "the failure is meshagent --check-config's" grep -q 'link.agent_port' "$work/broken.log"
check "h1's config untouched" test "$(on h1 md5sum /etc/meshagent/agent.toml)" = "$sum_before"
check "h2 and h3 not even visited (the rollout stopped)" bash -c "! grep -qE '^(ok|changed): \[h[23]\]' <(sed -n '/agent_port/,\$p' '$work/broken.log')"
for h in "${hosts[@]}"; do check "$h: agent still running, not restarted" test "$(agent_pid "$h")" = "${pid_before[$h]}"; done

step "a real change (log level debug): restarted one node at a time"
if ! playbook "$work/change.log" -e meshagent_log_level=debug; then cat "$work/change.log"; exit 1; fi
recap "$work/change.log"
for h in "${hosts[@]}"; do
  check "$h: agent restarted" bash -c "[ '$(agent_pid "$h")' != '${pid_before[$h]}' ] && [ '$(agent_pid "$h")' != none ]"
done
order=$(grep -oE '^(RUNNING HANDLER \[meshagent : Restart meshagent \(direct\)\]|changed: \[h[0-9]\])' "$work/change.log" |
  grep -A1 'RUNNING HANDLER' | grep -o 'h[0-9]' | paste -sd' ')
echo "  restart order: $order"
check "restarts went one node at a time, in inventory order" test "$order" = "h1 h2 h3"
for h in "${hosts[@]}"; do
  ok=0
  for _ in $(seq 60); do
    [[ "$(members_alive "$h")" == "h1 h2 h3" ]] && { ok=1; break; }
    sleep 1
  done
  check "$h: mesh whole again after the rolling restart" test "$ok" = 1
done

echo
echo "ansible_e2e: $((checks - failures)) passed, $failures failed"
((failures == 0))
