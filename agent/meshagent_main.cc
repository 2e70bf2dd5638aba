// meshagent: one smart node of the mesh. Reads its TOML config, binds the
// agent link, storage and admin socket, and runs the Node on one asio
// io_context (one thread) until SIGINT or SIGTERM.

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <asio/io_context.hpp>
#include <asio/signal_set.hpp>
#include <asio/steady_timer.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "agent/admin_service.h"
#include "agent/config.h"
#include "agent/drivers/driver_factory.h"
#include "agent/node.h"
#include "agent/runtime/admin_server.h"
#include "agent/runtime/asio_env.h"
#include "agent/runtime/file_storage.h"
#include "agent/runtime/write_behind_storage.h"
#include "agent/runtime/kernel_route_sync.h"
#include "agent/runtime/key_file_check.h"
#include "agent/runtime/kernel_routes.h"
#include "agent/runtime/loopback_link.h"
#include "agent/runtime/systemd_notify.h"
#include "agent/runtime/udp_link.h"
#include "agent/topology_file.h"
#include "core/log.h"
#include "core/version.h"

namespace mesh::agent {
namespace {

// Exit statuses, as documented in --help.
constexpr int kExitOk = 0;
constexpr int kExitRuntime = 1;
constexpr int kExitConfig = 2;

// How long a stopping agent keeps running after announcing its leave: a few
// piggy-backed rounds of Medley's (1 s probe period) reach the neighbours.
constexpr std::chrono::milliseconds kLeaveGrace{1000};

constexpr const char* kHelp = R"(NAME
    meshagent - the agent of one smart node on a home mesh

SYNOPSIS
    meshagent --config FILE
    meshagent --check-config FILE
    meshagent --version
    meshagent --help

DESCRIPTION
    meshagent runs unchanged on every node of the mesh (a Raspberry Pi on
    an 802.11s or Ethernet mesh, a network namespace, or an address on
    loopback). There is no hub: the agents find each other and the routes
    across the mesh with OLSR (RFC 3626, on its own UDP port, wire-compatible
    with other OLSR daemons), carry authenticated end-to-end messages hop by
    hop along those routes, and answer meshctl(1) on a local Unix socket.

    The agent runs in the foreground, logs to standard error (journald
    under systemd) in key=value form, and keeps its durable state (the boot
    count behind its replay-protection counters, replicated group state) in
    the storage directory. A thread of its own writes it, batching changes
    into few fsyncs with atomic renames, so a slow disk never stalls the
    event loop; whatever may depend on a change (a message to another node,
    a meshctl answer, a device command) waits until the change is durable,
    so a power cut loses nothing acknowledged. Failure detection (Medley)
    and ping never wait for the disk.

    Two link modes:
    interface
        UDP sockets on 0.0.0.0:agent_port and 0.0.0.0:olsr_port (default
        698, which needs root or CAP_NET_BIND_SERVICE). Broadcasts go to
        the broadcast address of every interface in link.interfaces; the
        node's id is node.address, or the first interface's IPv4 address if
        unset. The other interfaces' addresses are announced with MID.
    loopback
        A whole mesh on one machine without root: each agent binds its own
        node.address in 127.0.0.0/8 (agent_port, and olsr_port, default
        agent_port + 1) and link.topology_file lists who hears whom (one
        "ADDRESS ADDRESS" edge per line). Datagrams from agents that are not
        neighbours in the file are dropped.

    Kernel routes (routing.install_kernel_routes = true, interface mode
    only): the agent also writes OLSR's routes into the kernel's main table,
    so plain IP (ssh, a web UI) crosses the mesh: a neighbour on-link, any
    other node via its next hop, metric = hops, marked with routing protocol
    routing.kernel_route_protocol (default 158; `ip route show proto 158`).
    It needs CAP_NET_ADMIN, and net.ipv4.ip_forward = 1 on the nodes that
    relay. At start the agent removes the routes of that protocol an earlier
    run left (kill -9, power cut), re-checks the table every TC interval,
    and withdraws its routes when it stops.

    Every datagram is authenticated with HMAC-SHA256 under the mesh key,
    32 random bytes shared by all agents of one mesh, written as 64 hex
    digits in the key file. Create it once and copy it to every node:
        openssl rand -hex 32 > /etc/meshagent/mesh.key
        chmod 600 /etc/meshagent/mesh.key

OPTIONS
    --config FILE
        Runs the agent with the configuration in FILE (TOML).

    --check-config FILE
        Validates FILE (syntax, keys, values, the mesh key file, and in
        loopback mode the topology file) without starting anything. Prints
        "FILE: ok" and a one-line summary, or every problem found with its
        line, key and fix.

    --version
        Prints the version.

    -h, --help
        Prints this text.

FILES
    /etc/meshagent/agent.toml
        The usual configuration file (systemd unit: meshagent.service).
        Tables: [node] name, address, location; [link] mode, interfaces,
        topology_file, agent_port (default 6980), olsr_port; [security]
        mesh_key_file, accepted_mesh_key_file, replay_window; [routing] OLSR intervals, hold times,
        willingness, hna_networks, install_kernel_routes,
        kernel_route_protocol; [transport] and [requests] timings;
        [admin] socket,
        ping_timeout_ms; [storage] data_dir; [log] level, [log.layers].
        Relative paths are taken relative to the config file's directory.
    /etc/meshagent/mesh.key
        The mesh key (security.mesh_key_file): 64 hex digits, mode 0600.
    /run/meshagent/admin.sock
        The admin socket meshctl(1) talks to (admin.socket), mode 0660.
        Removed when the agent stops.
    /var/lib/meshagent/
        Durable state (storage.data_dir), created with mode 0700.

SYSTEMD
    Under a Type=notify unit the agent sends READY=1 once it serves,
    STOPPING=1 when it starts to stop, and, when WatchdogSec= is set,
    WATCHDOG=1 every half period from its event loop (sd_notify(3)
    protocol on $NOTIFY_SOCKET). Elsewhere nothing is sent.

    The agent refuses to start (exit 2), and --check-config fails, when
    the mesh key file grants any access to its group or to other users;
    fix it with chmod 600 on the file, owned by the user the agent runs as.

SIGNALS
    SIGINT, SIGTERM
        Stop cleanly: close the admin socket (removing its file), announce
        the leave to the membership and keep answering for 1 s so the other
        nodes list this one as left, then stop the node, withdraw the
        agent's kernel routes and exit 0. A second signal skips the wait.
    SIGPIPE
        Ignored; a meshctl that goes away mid-answer only closes its
        connection.

EXIT STATUS
    0   the agent stopped on SIGINT or SIGTERM; --check-config found no
        problem; --help or --version.
    1   the agent could not start or failed while running: a socket could
        not be bound (port in use, privileged port without root, address
        not configured), an interface is missing or has no IPv4 address,
        the storage directory or admin socket cannot be created, kernel
        routes are enabled without CAP_NET_ADMIN; a storage write failed
        part-way (an fsync or rename error: the agent stops at once rather
        than trust the disk, and recovers at restart). The message names the
        cause and the fix.
    2   the command line or the configuration is wrong.

EXAMPLES
    A node on a Pi, /etc/meshagent/agent.toml:
        [node]
        name = "kitchen"
        [link]
        mode = "interface"
        interfaces = ["wlan0"]
        [security]
        mesh_key_file = "mesh.key"

    One agent of a loopback mesh:
        [node]
        name = "n1"
        address = "127.0.0.11"
        [link]
        mode = "loopback"
        topology_file = "topology.txt"
        agent_port = 6980
        [security]
        mesh_key_file = "mesh.key"
        [admin]
        socket = "/tmp/mesh/n1/admin.sock"
        [storage]
        data_dir = "/tmp/mesh/n1/data"

    meshagent --check-config /etc/meshagent/agent.toml
    meshagent --config /etc/meshagent/agent.toml
    scripts/demo        (starts a 9-node loopback mesh)

SEE ALSO
    meshctl(1), scripts/testbed --help
)";

constexpr const char* kUsage = "usage: meshagent --config FILE | --check-config FILE | --version | --help\n";

std::string link_summary(const AgentConfig& config) {
  if (config.link.mode == LinkConfig::Mode::loopback) {
    return fmt::format("loopback({}:{},olsr:{})", config.node.id.to_string(), config.link.agent_port,
                       config.link.olsr_port);
  }
  return fmt::format("interface({}:{},olsr:{})", fmt::join(config.link.interfaces, ","), config.link.agent_port,
                     config.link.olsr_port);
}

std::string id_summary(const AgentConfig& config) {
  if (!config.node.id.is_unspecified()) return config.node.id.to_string();
  return fmt::format("auto({})", config.link.interfaces.empty() ? "?" : config.link.interfaces.front());
}

int check_config(const std::string& path) {
  try {
    const AgentConfig config = load_config(path);
    if (const auto problem = check_key_file_permissions(config.mesh_key_file)) {
      std::fprintf(stderr, "%s: security.mesh_key_file: %s\n", config.source.c_str(), problem->c_str());
      return kExitConfig;
    }
    if (const auto problem = check_key_file_permissions(config.accepted_mesh_key_file)) {
      std::fprintf(stderr, "%s: security.accepted_mesh_key_file: %s\n", config.source.c_str(), problem->c_str());
      return kExitConfig;
    }
    std::printf("%s: ok\n", path.c_str());
    const std::string kernel_routes =
        config.kernel_routes.install ? fmt::format("proto{}", config.kernel_routes.protocol) : std::string("off");
    std::printf("name=%s id=%s link=%s kernel_routes=%s admin=%s data=%s log=%s\n", config.node.name.c_str(),
                id_summary(config).c_str(), link_summary(config).c_str(), kernel_routes.c_str(),
                config.admin_socket.c_str(), config.data_dir.c_str(), config.log_level.c_str());
    return kExitOk;
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return kExitConfig;
  }
}

// Failures while starting that are not mistakes in the config file itself
// (a port in use, a missing interface) exit 1; the message says what to do.
class StartError : public std::runtime_error {
  using runtime_error::runtime_error;
};

// One link per port: agent Envelopes and OLSR packets never share a socket.
std::unique_ptr<core::Link> make_link(asio::io_context& io, const AgentConfig& config, const NodeConfig& node,
                                      uint16_t port) {
  if (config.link.mode == LinkConfig::Mode::interface) {
    return std::make_unique<UdpInterfaceLink>(io, config.link.interfaces, port);
  }
  // load_config() already read and checked it; read again for the edges.
  const auto topology = load_topology_file(config.link.topology_file);
  if (!topology) throw ConfigError(fmt::format("{}: link.topology_file: {}", config.source, topology.error()));
  const std::vector<core::NodeId> neighbours = topology->neighbours_of(node.id);
  if (neighbours.empty()) {
    core::log("agent").warn("no neighbours in the topology file address={} topology_file={}", node.id.to_string(),
                            config.link.topology_file);
  }
  return std::make_unique<LoopbackMeshLink>(io, node.id, port, neighbours);
}

// OLSR announces a node's other interface addresses with MID.
void add_interface_aliases(const core::Link& olsr_link, NodeConfig& node) {
  const auto* udp = dynamic_cast<const UdpInterfaceLink*>(&olsr_link);
  if (udp == nullptr) return;
  for (const InterfaceAddress& iface : udp->interfaces()) {
    auto& extra = node.routing.extra_interfaces;
    if (iface.address != node.id && std::find(extra.begin(), extra.end(), iface.address) == extra.end()) {
      extra.push_back(iface.address);
    }
  }
}

// The IPv4 address, subnet and interface number of each mesh interface
// (the first IPv4 address of each, as UdpInterfaceLink uses).
std::vector<MeshInterface> mesh_interfaces(const std::vector<std::string>& names) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) {
    throw StartError(fmt::format("cannot list the network interfaces: {}", std::strerror(errno)));
  }
  const std::unique_ptr<ifaddrs, void (*)(ifaddrs*)> owner(list, ::freeifaddrs);
  std::vector<MeshInterface> interfaces;
  for (const std::string& name : names) {
    const ifaddrs* entry = list;
    while (entry != nullptr &&
           (entry->ifa_addr == nullptr || entry->ifa_addr->sa_family != AF_INET || name != entry->ifa_name)) {
      entry = entry->ifa_next;
    }
    const unsigned ifindex = ::if_nametoindex(name.c_str());
    if (entry == nullptr || ifindex == 0) {
      throw StartError(fmt::format("interface {} is gone or has no IPv4 address; check `ip addr show {}`", name, name));
    }
    MeshInterface iface;
    iface.ifindex = static_cast<int>(ifindex);
    iface.address = core::Ipv4Address(ntohl(reinterpret_cast<const sockaddr_in*>(entry->ifa_addr)->sin_addr.s_addr));
    if (entry->ifa_netmask != nullptr) {
      const uint32_t mask = ntohl(reinterpret_cast<const sockaddr_in*>(entry->ifa_netmask)->sin_addr.s_addr);
      iface.prefix_length = static_cast<uint8_t>(std::popcount(mask));
    }
    interfaces.push_back(iface);
  }
  return interfaces;
}

// The agent link of a routing-only node: it binds no port, so agent
// datagrams addressed to this node are refused by its kernel, and it sends
// nothing, so the node relays agent traffic no more than a plain olsrd.
class NoAgentLink final : public core::Link {
 public:
  explicit NoAgentLink(core::Ipv4Address address) : address_(address) {}
  core::Ipv4Address local_address() const override { return address_; }
  void broadcast(core::ByteSpan) override {}
  void send(core::Ipv4Address, core::ByteSpan) override {}
  void set_receiver(Receiver) override {}

 private:
  core::Ipv4Address address_;
};

// Keeps the agent's routes in the kernel's table equal to OLSR's table: on
// every change, and again every TC interval, so routes the kernel dropped
// (an interface went down and up) come back. Destroying it withdraws them.
class KernelRouteInstaller {
 public:
  KernelRouteInstaller(core::Env& env, std::unique_ptr<KernelRoutes> routes, std::vector<MeshInterface> interfaces,
                       std::vector<core::Ipv4Address> own, core::Duration resync_period)
      : routes_(std::move(routes)), interfaces_(std::move(interfaces)), own_(std::move(own)), resync_(env) {
    resync_.start_periodic(resync_period, [this] { sync(); });
  }

  void update(const std::vector<routing::olsr::Route>& table) {
    KernelRouteMapping mapping = map_kernel_routes(table, interfaces_, own_);
    for (const SkippedRoute& skipped : mapping.skipped) {
      log().debug("kernel route skipped dst={} via={} reason=\"{}\"", skipped.route.destination.to_string(),
                  skipped.route.next_hop.to_string(), skipped.reason);
    }
    wanted_ = std::move(mapping.routes);
    sync();
  }

 private:
  static spdlog::logger& log() { return core::log("agent"); }

  void sync() {
    // KernelRoutes::sync() logged each failed route; this says what they add up to.
    const SyncResult result = routes_->sync(wanted_);
    if (!result.ok()) {
      log().warn("kernel routes differ from OLSR's table wanted={} errors={}", wanted_.size(), result.errors.size());
    }
  }

  std::unique_ptr<KernelRoutes> routes_;
  std::vector<MeshInterface> interfaces_;
  std::vector<core::Ipv4Address> own_;
  std::vector<KernelRoute> wanted_;
  core::ScopedTimer resync_;  // declared last: cancelled before the routes are withdrawn
};

std::unique_ptr<KernelRouteInstaller> make_kernel_route_installer(core::Env& env, const AgentConfig& config,
                                                                  const NodeConfig& node) {
  KernelRoutes::Options options;
  options.protocol = config.kernel_routes.protocol;
  auto routes = KernelRoutes::open(options);
  if (!routes) {
    throw StartError(fmt::format("routing.install_kernel_routes = true in {}, but kernel routes cannot be used: {}",
                                 config.source, routes.error()));
  }
  std::ifstream forwarding("/proc/sys/net/ipv4/ip_forward");
  int enabled = 1;
  if (forwarding >> enabled && enabled == 0) {
    core::log("agent").warn(
        "net.ipv4.ip_forward is 0: this node reaches the mesh over IP but relays no IP traffic for others "
        "fix=\"sysctl -w net.ipv4.ip_forward=1\"");
  }
  std::vector<core::Ipv4Address> own = node.routing.extra_interfaces;
  own.push_back(node.id);
  return std::make_unique<KernelRouteInstaller>(env, std::move(*routes), mesh_interfaces(config.link.interfaces),
                                                std::move(own), node.routing.tc_interval);
}

int run(const std::string& path) {
  AgentConfig config;
  try {
    config = load_config(path);
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return kExitConfig;
  }
  for (const std::string& key_file : {config.mesh_key_file, config.accepted_mesh_key_file}) {
    if (const auto problem = check_key_file_permissions(key_file)) {
      std::fprintf(stderr, "meshagent: refusing to start: %s\n", problem->c_str());
      return kExitConfig;
    }
  }
  if (!core::set_log_level(config.log_level)) {
    std::fprintf(stderr, "%s: log.level: unknown level \"%s\"\n", config.source.c_str(), config.log_level.c_str());
    return kExitConfig;
  }
  for (const auto& [layer, level] : config.layer_log_levels) {
    if (!core::set_log_level(level, layer)) {
      std::fprintf(stderr, "%s: log.layers.%s: unknown level \"%s\" or layer\n", config.source.c_str(), layer.c_str(),
                   level.c_str());
      return kExitConfig;
    }
  }
  auto& log = core::log("agent");
  if (config.node.mutex.network_size.floor == 0) {
    log.warn("mutex.expected_nodes is not set: a lock requested while the mesh boots waits until this node's "
             "member list stops growing (boot_settle_ms), but a mesh split since boot, each side never hearing "
             "of the other, could grant the same lock on both sides fix=\"set [mutex] expected_nodes to the "
             "number of smart nodes\" config={}",
             config.source);
  }

  NodeConfig node_config = config.node;
  if (node_config.id.is_unspecified()) {
    if (config.link.mode != LinkConfig::Mode::interface || config.link.interfaces.empty()) {
      std::fprintf(stderr, "%s: node.address: required in loopback mode (e.g. address = \"127.0.0.11\")\n",
                   config.source.c_str());
      return kExitConfig;
    }
    const auto address = UdpInterfaceLink::interface_address(config.link.interfaces.front());
    if (!address) {
      std::fprintf(stderr, "meshagent: cannot start: %s\n", address.error().c_str());
      return kExitRuntime;
    }
    node_config.id = *address;
  }

  // Writing to a meshctl that already hung up must not kill the agent.
  std::signal(SIGPIPE, SIG_IGN);

  asio::io_context io;
  AsioEnv env(io);
  std::unique_ptr<core::Link> link;
  std::unique_ptr<core::Link> olsr_link;
  std::unique_ptr<FileStorage> files;
  std::unique_ptr<WriteBehindStorage> storage;
  // Before the node: it outlives the node, whose routes listener calls it.
  std::unique_ptr<KernelRouteInstaller> kernel_routes;
  // Declared before the node, so it outlives every driver the node opens.
  std::unique_ptr<drivers::AgentDriverFactory> drivers;
  std::unique_ptr<Node> node;
  std::unique_ptr<AdminService> service;
  std::unique_ptr<AdminServer> admin;
  try {
    if (node_config.routing_only) {
      link = std::make_unique<NoAgentLink>(node_config.id);
    } else {
      link = make_link(io, config, node_config, config.link.agent_port);
    }
    olsr_link = make_link(io, config, node_config, config.link.olsr_port);
    add_interface_aliases(*olsr_link, node_config);
    files = std::make_unique<FileStorage>(config.data_dir);
    storage = std::make_unique<WriteBehindStorage>(
        *files, [&io](std::function<void()> work) { asio::post(io, std::move(work)); },
        [&log](const std::string& why) {
          log.critical("meshagent stopping at once: {}", why);
          std::_Exit(kExitRuntime);
        });
    if (config.kernel_routes.install) kernel_routes = make_kernel_route_installer(env, config, node_config);
    // Epoch 0 of every k-group began at the Unix epoch: the one time base
    // all nodes share (through NTP), read here and nowhere in protocol code.
    node_config.kgroup.epoch_origin =
        env.now() - std::chrono::duration_cast<core::Duration>(std::chrono::system_clock::now().time_since_epoch());
    drivers = std::make_unique<drivers::AgentDriverFactory>(io);
    node = std::make_unique<Node>(node_config, NodeContext{env, *link, *olsr_link, *storage, drivers.get()});
    if (kernel_routes) {
      node->add_routes_listener([installer = kernel_routes.get()](const std::vector<routing::olsr::Route>& routes) {
        installer->update(routes);
      });
    }
    service = std::make_unique<AdminService>(*node);
    admin = std::make_unique<AdminServer>(io, config.admin_socket, *service, node->metrics());
    admin->start();
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return kExitConfig;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "meshagent: cannot start: %s\n", e.what());
    return kExitRuntime;
  }

  // Under systemd (Type=notify, WatchdogSec=): READY=1 once serving,
  // WATCHDOG=1 from this event loop, STOPPING=1 on the way out.
  const SystemdNotifier notifier = SystemdNotifier::from_environment();
  WatchdogPinger watchdog(io, notifier);

  asio::signal_set signals(io, SIGINT, SIGTERM);
  asio::steady_timer leave_timer(io);
  int stop_signal = 0;
  std::function<void(const asio::error_code&, int)> on_signal = [&](const asio::error_code& error, int signal_number) {
    if (error) return;
    if (stop_signal != 0) {
      log.info("meshagent stopping now signal={} reason=second_signal", signal_number == SIGINT ? "SIGINT" : "SIGTERM");
      io.stop();
      return;
    }
    stop_signal = signal_number;
    notifier.notify("STOPPING=1");
    log.info("meshagent stopping signal={} leave_grace_ms={}", signal_number == SIGINT ? "SIGINT" : "SIGTERM",
             std::chrono::duration_cast<std::chrono::milliseconds>(kLeaveGrace).count());
    admin->stop();
    // Announce the leave and keep answering for a moment, so the others
    // mark this node `left` at once instead of suspecting it for the whole
    // suspicion timeout.
    node->leave();
    leave_timer.expires_after(kLeaveGrace);
    leave_timer.async_wait([&](const asio::error_code& timer_error) {
      if (!timer_error) io.stop();
    });
    signals.async_wait(on_signal);
  };
  signals.async_wait(on_signal);

  node->start();
  log.info("meshagent started id={} name={} link={} admin={} version={}", node_config.id.to_string(), node_config.name,
           link_summary(config), config.admin_socket, kVersion);
  std::string notify_error;
  if (!notifier.notify(fmt::format("READY=1\nSTATUS=serving id={}", node_config.id.to_string()), &notify_error)) {
    log.warn("systemd notification failed error=\"{}\"", notify_error);
  }
  watchdog.start();

  try {
    io.run();
  } catch (const std::exception& e) {
    log.critical("meshagent failed error=\"{}\"", e.what());
    admin->stop();
    return kExitRuntime;
  }

  // Teardown top down: nothing may call into the node once it is gone.
  admin.reset();
  service.reset();
  node.reset();
  kernel_routes.reset();  // withdraws every kernel route of ours
  log.info("meshagent stopped signal={}", stop_signal == SIGINT ? "SIGINT" : "SIGTERM");
  return kExitOk;
}

}  // namespace
}  // namespace mesh::agent

int main(int argc, char** argv) {
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    std::fputs(mesh::agent::kHelp, stdout);
    return mesh::agent::kExitOk;
  }
  if (args.size() == 1 && args[0] == "--version") {
    std::printf("meshagent %s\n", mesh::kVersion);
    return mesh::agent::kExitOk;
  }
  if (args.size() == 2 && args[0] == "--config") return mesh::agent::run(std::string(args[1]));
  if (args.size() == 2 && args[0] == "--check-config") return mesh::agent::check_config(std::string(args[1]));
  if (!args.empty() && (args[0] == "--config" || args[0] == "--check-config") && args.size() == 1) {
    std::fprintf(stderr, "meshagent: %s needs a FILE\n", std::string(args[0]).c_str());
  } else if (!args.empty()) {
    std::fprintf(stderr, "meshagent: unexpected arguments starting at '%s'\n", std::string(args[0]).c_str());
  }
  std::fputs(mesh::agent::kUsage, stderr);
  std::fputs("Run 'meshagent --help' for details.\n", stderr);
  return mesh::agent::kExitConfig;
}
