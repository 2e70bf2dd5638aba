#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "core/env.h"
#include "core/link.h"
#include "core/metrics.h"
#include "core/node_id.h"
#include "routing/expiry_index.h"
#include "routing/olsr_packet.h"
#include "routing/route_calculation.h"
#include "routing/topology_set.h"
#include "routing/u64_hash_map.h"

namespace mesh::routing::olsr {

// RFC 3626 §19: 16-bit sequence numbers (message sequence numbers, ANSN)
// wrap, so `a` is newer than `b` when it is ahead by less than half the space.
bool seq_newer(uint16_t a, uint16_t b);

// The first ANSN of a node's boot number `boot_count` (OlsrOptions::first_ansn):
// 4096 ahead of the previous boot's, wrapping.
uint16_t first_ansn_of_boot(uint64_t boot_count);

// Defaults are the RFC's constants (§18).
struct OlsrOptions {
  core::NodeId main_address;
  uint8_t willingness = kWillDefault;
  core::Duration hello_interval = std::chrono::seconds(2);
  core::Duration tc_interval = std::chrono::seconds(5);
  core::Duration mid_interval = std::chrono::seconds(5);
  core::Duration hna_interval = std::chrono::seconds(5);
  core::Duration neighb_hold = std::chrono::seconds(6);
  // The TC, MID and HNA holds: packed, their messages announce a little more
  // (OlsrProtocol's class comment: how much, and why).
  core::Duration top_hold = std::chrono::seconds(15);
  core::Duration dup_hold = std::chrono::seconds(30);
  core::Duration mid_hold = std::chrono::seconds(15);
  core::Duration hna_hold = std::chrono::seconds(15);
  // MAXJITTER: every emission comes up to this much early, and forwarded
  // messages wait up to this long so neighbours do not retransmit in
  // lockstep. Unset means hello_interval / 4, as §18.6 suggests.
  std::optional<core::Duration> max_jitter;
  // At most one route calculation per this interval. The first topology
  // change after a quiet interval is calculated at once (a lone change, the
  // usual case on a small mesh, costs no delay); later ones wait for the
  // interval's end and are calculated together. In an N-node mesh TCs with a
  // new ANSN arrive about N times as often as on one node's neighbourhood, so
  // recalculating on each made every node's cost per packet grow with N
  // (O(N log N) per calculation); olsrd likewise recalculates at most once
  // per scheduler poll. Zero recalculates on every change.
  core::Duration route_recalc_interval = std::chrono::milliseconds(100);
  // The first ANSN. A restarted node's TCs are dropped as stale (§9.5 step
  // 2) while neighbours still hold topology tuples from its previous run
  // with a newer ANSN, up to the vtime of its last old TC: routes beyond it
  // vanish and come back seconds later. A random start (unset) is stale half
  // the time; the agent starts each boot 4096 ahead of the previous one
  // (boot count x 4096), which is newer whenever the previous run changed
  // its advertised set fewer than 4096 times (first_ansn_of_boot).
  std::optional<uint16_t> first_ansn;
  // Networks this node is a gateway for (§12).
  std::vector<HnaEntry> hna_networks;
  // Further interface addresses to announce with MID besides the link's own.
  std::vector<core::Ipv4Address> extra_interfaces;
  // false: every message leaves in a packet of its own the moment it is
  // generated (forwarded ones after their jitter), and each periodic message
  // keeps its own timer: the unpacked emission the benchmarks compare packing
  // against. Receivers cannot tell the difference except by the packet count.
  bool pack_messages = true;
  // false: classic link-state flooding instead of MPR flooding, the baseline
  // of the benchmarks only. Every node then sends TCs listing all its
  // symmetric neighbours, and retransmits every flooded message once,
  // whoever sent it. Not RFC 3626; never set it on a real mesh.
  bool mpr_flooding = true;
};

enum class LinkStatus { symmetric, asymmetric, lost };
std::string_view to_string(LinkStatus status);

struct NeighbourInfo {
  core::NodeId main;
  core::Ipv4Address link_address;  // the address we hear it from
  LinkStatus status = LinkStatus::lost;
  core::TimePoint last_heard;      // latest HELLO on that link
  uint8_t willingness = kWillDefault;
  bool is_mpr = false;           // we chose it
  bool is_mpr_selector = false;  // it chose us
};

struct TopologyInfo {
  core::NodeId dest;  // T_dest
  core::NodeId last;  // T_last: the originator of the TC
  uint16_t ansn = 0;
  double seconds_left = 0;
};

struct HnaInfo {
  core::NodeId gateway;
  HnaEntry network;
  double seconds_left = 0;
};

// One node's OLSR (RFC 3626) as a sans-IO state machine: link sensing,
// neighbour and two-hop sets, MPRs and MPR selectors, TC flooding through the
// default forwarding algorithm, MID and HNA, and the routing table. The node
// has one OLSR interface, whose address is the link's local address.
//
// Message packing (RFC 3626 §3.3 and §3.4: a packet carries one or more
// messages, and a receiver processes and forwards each message on its own,
// whatever packet brought it). Like olsrd, this node fills each packet with
// every message that is due soon instead of sending one packet per message:
//  - A HELLO is due one interval after its last emission, and its timer
//    fires a random jitter in [0, MAXJITTER] before that (§3.5: actual
//    interval = interval - jitter; MAXJITTER from §18), as without packing:
//    no gap between two HELLOs exceeds HELLO_INTERVAL, so NEIGHB_HOLD_TIME
//    (3x) keeps its full margin against lost HELLOs.
//  - When a HELLO leaves (or any packet: a forwarded message's jitter ending),
//    the packet also takes each TC, MID and HNA that would otherwise leave
//    alone before the next HELLO, provided its pack window is open: it is due
//    within min(HELLO_INTERVAL + MAXJITTER, interval / 2) (pack_advance()).
//    That reach is the longest gap between two HELLOs, so every TC, MID and
//    HNA rides in a HELLO's packet, up to one HELLO gap early. A packet other
//    than a HELLO's takes the HELLO too when the HELLO's own jitter window is
//    open (due within MAXJITTER). All types start due together, so TCs, MIDs
//    and HNAs share a packet too.
//  - A TC, MID or HNA keeps its nominal schedule: the next is due one
//    interval after the previous was due, not after it actually left. Were
//    it due one interval after an early emission, every early ride would
//    shorten the interval: TCs (flooded mesh-wide) went out about every
//    3.5 s instead of 5, and grids sent 1.26x (5x5) to 1.33x (10x10) the
//    OLSR bytes of the unpacked emission. On the nominal schedule their
//    rate is 1 / interval, below the unpacked 1 / (interval - MAXJITTER / 2).
//  - The price is that gaps may exceed the interval: n gaps span up to
//    n x interval + pack_advance() (the earliest emission to the latest),
//    so with the RFC's 3x holds two lost TCs in a row could expire a
//    topology entry (an earlier version, nominal for HELLOs too, took
//    olsr_sim_test's lossy line sweep from 93 % routes right to 85 %). So
//    packed TCs, MIDs and HNAs announce a vtime of hold + pack_advance()
//    (15 s + 2.5 s, 18 s once rounded up to the vtime encoding), which
//    covers as many lost messages in a row as the hold covers unpacked;
//    the lossy sweeps stay at or above the unpacked emission's
//    (bench/README.md). Receivers keep a message's information for the
//    vtime it carries (§3.3.2), which its originator chooses (§18's
//    TOP_HOLD_TIME and the others are proposed values), so only the value
//    of the vtime byte changes, never the format. Unpacked, every type
//    announces its configured hold, as before.
//  - Forwarded messages wait a jitter of up to MAXJITTER (§3.5 and the
//    default forwarding algorithm, §3.4.1), and leave early with any packet
//    the node sends meanwhile, own messages included.
//  - Messages from originate() may wait the max_wait their caller allows for
//    the next packet (at most HELLO_INTERVAL + MAXJITTER, the longest wait
//    for a HELLO); zero sends them now, with whatever is due within its window.
//  - A packet never exceeds link.max_datagram_size(): a batch that does not
//    fit is split, in order, over several packets. The order follows olsrd's
//    (own TC, MID, HNA, then forwarded and originated messages, then HELLO).
// Nothing here is triggered outside the periodic schedule (a changed MPR
// selector set only moves the ANSN on; the next TC carries it), so no message
// needs to bypass packing. Receivers see only RFC 3626 packets and messages.
class OlsrProtocol {
 public:
  using Options = OlsrOptions;

  // `link` carries raw RFC 3626 datagrams, one packet each.
  OlsrProtocol(core::Env& env, core::Link& link, core::Metrics& metrics, Options options);
  // Detaches from the link, which may outlive the protocol.
  ~OlsrProtocol();
  OlsrProtocol(const OlsrProtocol&) = delete;
  OlsrProtocol& operator=(const OlsrProtocol&) = delete;

  // Listens on the link and starts the periodic HELLO, TC, MID and HNA
  // emissions, each after a jitter.
  void start();
  // Stops emitting and listening; the state stays readable.
  void stop();

  core::NodeId main_address() const { return options_.main_address; }

  // Sorted by destination.
  const std::vector<Route>& routes() const { return routes_; }
  std::optional<Route> route_to(core::Ipv4Address destination) const;
  // Sorted by main address.
  std::vector<NeighbourInfo> neighbours() const;
  // Sorted by (last, dest).
  std::vector<TopologyInfo> topology() const;
  std::vector<HnaInfo> hna() const;
  std::set<core::NodeId> mprs() const { return mprs_; }
  std::set<core::NodeId> mpr_selectors() const;
  // Whether `main` chose this node as its MPR (and that choice has not
  // expired): MPR flooding retransmits only what such a neighbour sent.
  bool is_mpr_selector(core::NodeId main) const;
  // Strict and non-strict two-hop neighbours, as (via, two_hop) main addresses.
  std::vector<std::pair<core::NodeId, core::NodeId>> two_hop() const;
  // Moves on whenever the links this node knows of (symmetric neighbours,
  // two-hop and topology sets, MID aliases) may have changed, so a view
  // derived from them (hop distances) is rebuilt only when it could differ.
  uint64_t topology_version() const { return topology_version_; }

  // Called after the routing table changed (never from inside a call into
  // this object made by the owner, only from link or timer events).
  void set_routes_changed(std::function<void()> callback) { routes_changed_ = std::move(callback); }

  // Extension messages (§3.4: a type this protocol does not process is still
  // forwarded by the default forwarding algorithm, here and in other OLSR
  // daemons). originate() floods one from this node with ttl 255; the
  // listener sees every one received the first time (not duplicates, not our
  // own), from link events only, and must call only const methods. The
  // message may wait up to `max_wait` (capped at HELLO_INTERVAL + MAXJITTER)
  // to share the node's next packet; zero sends it now.
  void originate(uint8_t type, std::vector<uint8_t> body, core::Duration validity,
                 core::Duration max_wait = core::Duration::zero());
  using ExtensionListener = std::function<void(const Message& message, const OpaqueBody& body)>;
  void set_extension_listener(ExtensionListener listener) { extension_listener_ = std::move(listener); }

  // The main address of the node owning interface `address` (MID), or
  // `address` itself when no other is known: routes name next hops by
  // interface address.
  core::NodeId main_of(core::Ipv4Address address) const;

 private:
  struct LinkTuple {
    core::NodeId neighbour_main;
    core::TimePoint sym_time;
    core::TimePoint asym_time;
    core::TimePoint time;
    core::TimePoint last_heard;
    bool was_symmetric = false;  // as of the last refresh(), to spot transitions
  };
  struct NeighbourTuple {
    uint8_t willingness = kWillDefault;
    bool symmetric = false;
  };
  struct DuplicateTuple {
    core::TimePoint time;
    bool retransmitted = false;
  };
  struct MidTuple {
    core::NodeId main;
    core::TimePoint time;
  };
  struct HnaKey {
    core::NodeId gateway;
    core::Ipv4Address network;
    core::Ipv4Address netmask;
    friend auto operator<=>(const HnaKey&, const HnaKey&) = default;
  };

  void receive(core::Ipv4Address from, core::ByteSpan datagram);
  void process_hello(core::Ipv4Address from, const Message& message, const Hello& hello);
  void process_tc(const Message& message, const Tc& tc);
  void process_mid(const Message& message, const Mid& mid);
  void process_hna(const Message& message, const Hna& hna);
  // `message` is `header` decoded, if it was already; taken if forwarded.
  void consider_forwarding(core::Ipv4Address from, const ScannedMessage& header, std::optional<Message>& message,
                           DuplicateTuple& duplicate);

  // Drops expired tuples, derives neighbour status, recomputes MPRs, ANSN
  // and routes when their inputs changed, and re-arms the expiry timer.
  void refresh();
  // The link, neighbour, two-hop and MPR selector part of refresh(); sets
  // neighbourhood_next_change_.
  void refresh_neighbourhood(core::TimePoint now);
  void recompute_mprs();
  // Recalculates now, or arms route_timer_ for the end of the interval.
  void recalculate_routes_when_due(core::TimePoint now);
  void recompute_routes();
  void schedule_expiry();
  void purge_duplicates();
  void expire_topology(core::TimePoint now);
  void expire_mid(core::TimePoint now);

  bool is_symmetric_link(core::Ipv4Address iface) const;
  bool is_own_address(core::Ipv4Address address) const;

  Message new_message(MessageType type, core::Duration validity, uint8_t ttl);
  std::optional<Message> make_hello();
  std::optional<Message> make_tc();
  std::optional<Message> make_mid();
  std::optional<Message> make_hna();

  // The periodic message types, in the order they take in a packet.
  enum class Periodic : uint8_t { tc, mid, hna, hello };
  static constexpr size_t kPeriodicTypes = 4;
  core::Duration interval_of(Periodic type) const;
  // The configured hold time (OlsrOptions: neighb_hold, top_hold, ...).
  core::Duration hold_of(Periodic type) const;
  // The validity a message of the type announces (its vtime, rounded up on
  // the wire): hold_of(), plus the largest advance when packing moves the
  // type's emissions (see the class comment).
  core::Duration announced_hold(Periodic type) const;
  // The largest random advance of the type's own timer, and how early a
  // packet may take it (see the class comment).
  core::Duration jitter_bound(Periodic type) const;
  core::Duration pack_advance(Periodic type) const;
  core::ScopedTimer& timer_of(Periodic type);
  // Arms the type's timer for a jitter before it is next due.
  void arm(Periodic type);
  // Sends now: `fired` (if any), every periodic message whose pack window is
  // open (when packing), and everything queued.
  void emit(std::optional<Periodic> fired);
  // Queues a forwarded or originated message to leave by `deadline`.
  void enqueue(Message message, core::TimePoint deadline);
  // Packs the batch into as few packets as the link's limit allows (one
  // message a packet without packing).
  void send_batch(std::vector<Message> batch);
  core::Duration jitter();
  core::Duration jitter(core::Duration bound);
  core::Duration max_jitter() const;

  enum class Direction : uint8_t { received, sent };
  void count_message(uint8_t type, size_t bytes, Direction direction);
  void count_drop(std::string_view reason);

  core::Env& env_;
  core::Link& link_;
  core::Metrics& metrics_;
  Options options_;
  bool running_ = false;

  uint16_t packet_seq_ = 0;
  uint16_t message_seq_ = 0;
  uint16_t ansn_ = 0;

  std::map<core::Ipv4Address, LinkTuple> links_;  // by neighbour interface address
  std::map<core::NodeId, NeighbourTuple> neighbours_;
  std::map<std::pair<core::NodeId, core::NodeId>, core::TimePoint> two_hop_;  // (via, two_hop)
  std::set<core::NodeId> mprs_;
  std::map<core::NodeId, core::TimePoint> mpr_selectors_;
  std::optional<core::TimePoint> selectors_emptied_at_;  // for §9.3's empty TCs
  TopologySet topology_;
  // Keyed by duplicate_key(originator, seq). Looked up for every message
  // received and never iterated, so hashed; duplicate_expiry_ purges it in
  // time order (every tuple lives DUP_HOLD from its last update, so appending
  // keeps it sorted; an entry whose tuple was renewed since is skipped).
  U64HashMap<DuplicateTuple> duplicates_;
  std::deque<std::pair<core::TimePoint, uint64_t>> duplicate_expiry_;
  std::map<core::Ipv4Address, MidTuple> mid_;  // interface -> main address
  ExpiryIndex<core::Ipv4Address> mid_expiry_;
  std::map<HnaKey, core::TimePoint> hna_;

  bool neighbourhood_changed_ = false;  // MPR inputs
  bool selectors_changed_ = false;      // ANSN
  bool routes_dirty_ = false;           // route calculation inputs
  // The neighbour, two-hop or MID part of the route inputs changed since the
  // last calculation. While it is clear, the topology set's changes alone
  // are tested against the last table, and a calculation none of them can
  // alter is skipped: most topology changes of a large mesh alter no route.
  bool local_route_inputs_changed_ = true;
  RouteCalculator route_calculator_;
  std::optional<core::TimePoint> last_route_calculation_;
  uint64_t topology_version_ = 0;
  // Set by every HELLO; while it is clear and the earliest link, two-hop or
  // selector time ahead (as of the last walk) has not passed, refresh() skips
  // the walk of those sets: it would change nothing.
  bool neighbourhood_touched_ = true;
  std::optional<core::TimePoint> neighbourhood_next_change_;
  // Scratch for refresh(), kept to spare an allocation per packet.
  std::vector<std::pair<core::NodeId, bool>> link_symmetry_;
  std::vector<Route> routes_;
  // The counters of every message, by type (one for every type type_name()
  // calls "other", then hello, tc, mid, hna) and direction, each looked up
  // on first use: a series lookup per message counted cost as much as
  // processing a duplicate.
  static constexpr size_t kCountedTypes = 5;
  std::array<std::array<std::optional<core::TrafficCounter>, 2>, kCountedTypes> traffic_{};
  std::array<core::Counter*, kCountedTypes> forwarded_{};
  std::function<void()> routes_changed_;
  ExtensionListener extension_listener_;

  std::vector<ScannedMessage> scanned_;  // receive()'s scratch, kept to spare an allocation per packet
  std::vector<Message> outbox_;                        // forwarded and originated, in arrival order
  std::array<core::TimePoint, kPeriodicTypes> due_{};  // next emission, before jitter
  std::array<core::TimePoint, kPeriodicTypes> fire_at_{};  // when its timer fires
  std::optional<core::TimePoint> flush_deadline_;
  core::ScopedTimer hello_timer_;
  core::ScopedTimer tc_timer_;
  core::ScopedTimer mid_timer_;
  core::ScopedTimer hna_timer_;
  core::ScopedTimer flush_timer_;
  core::ScopedTimer expiry_timer_;
  core::TimePoint expiry_at_{};  // when expiry_timer_ fires, while it is active
  core::ScopedTimer route_timer_;
};

}  // namespace mesh::routing::olsr
