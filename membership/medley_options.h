#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "core/time.h"

namespace mesh::membership {

// How probe targets are drawn.
enum class ProbeOrder {
  // Medley's time-bounded "bag": each round holds copies of every member in
  // proportion to its weight, drawn without replacement, so every member is
  // probed at least once per round.
  bag,
  // Independent draws with probability proportional to the weight (Medley's
  // basic scheme; no completeness bound).
  independent,
};

// Every period, timeout and bound of Medley. Defaults follow the anchors:
// Medley's exponent 3, RTT-sized probe timeout and 3 indirect helpers;
// memberlist's LAN suspicion (4 and 6 times the log-scaled period),
// retransmission (4 * ceil(log10(N+1))) and push-pull interval with its
// log2(N) scaling. Beyond both: a member is suspected after 3 probes in a
// row that nobody answered: over lossy multi-hop paths single silent probes
// of far members caused most false suspicions and most membership traffic
// (medley_bench BM_TrafficBreakdown prints where the bytes go), and beyond
// silence_radius_hops silence counts for nothing at all.
struct MedleyOptions {
  // Who this node is, as it tells the others.
  std::string name;
  std::array<double, 3> location{};
  uint64_t initial_incarnation = 0;

  // Probing.
  core::Duration probe_period = std::chrono::seconds(1);
  core::Duration probe_timeout = std::chrono::milliseconds(500);  // direct ack wait (one RTT)
  size_t indirect_checks = 3;                                     // ping-req helpers
  double alpha = 3.0;                                             // P(target) ~ hops^-alpha; 0 = plain SWIM
  ProbeOrder probe_order = ProbeOrder::bag;
  // A bag round holds at most this many probes per member on average
  // (Medley's exact bag can be thousands of periods long with alpha = 3);
  // beyond it the skew is flattened so every member is probed at least once
  // every 2 * bag_limit_factor * N periods.
  size_t bag_limit_factor = 10;
  // A helper waits this fraction of its probe timeout before sending a nack.
  double nack_fraction = 0.8;
  // Probes in a row answered by nobody (no ack, no helper's nack) before an
  // alive member is suspected; 1 = classic SWIM. A nack-confirmed failure
  // suspects at once.
  uint32_t silent_probes_to_suspect = 3;
  // Silence is evidence only near. A probe's round trip over h hops at 5 %
  // loss per hop fails 1 - 0.95^(2h) of the time: 46 % at 6 hops, 95 % at 30,
  // so on a mesh of large diameter nearly every probe of a far member goes
  // unanswered and, counted like a near one, feeds a storm of false
  // suspicions whose refutations then crowd the piggy-back slots. Beyond
  // this many hops a probe nobody answered neither counts toward suspecting
  // the member nor toward this node's local health; suspecting a far member
  // takes nacks from far_nacks_to_suspect helpers (they sit near it). A
  // crashed member is still found at once by its near neighbours, which
  // probe it most (hops^-alpha). 0: no radius (every probe counts).
  uint32_t silence_radius_hops = 6;
  uint32_t far_nacks_to_suspect = 2;

  // Medley's feedback for the detection tail. Passive: a live member within
  // passive_feedback_radius_hops not heard from (no message or ack from it)
  // for passive_feedback_after is probed next, ahead of the skewed draw, and
  // so is one another node suspects (its confirmations shorten the
  // suspicion; a crashed node with two neighbours otherwise has two
  // accusers). The radius keeps that from turning into probing every member
  // every 40 s, which at 400 members is SWIM's traffic, and beyond
  // silence_radius_hops an unanswered probe proves nothing anyway. 0 s: off.
  core::Duration passive_feedback_after = std::chrono::seconds(40);
  uint32_t passive_feedback_radius_hops = 2;
  // Active: this node keeps a moving average (weight active_feedback_alpha)
  // of the gap between the probes it receives, the gap still open counted
  // once it is longer. While that is above active_feedback_gap (a corner
  // node with few neighbours), its pings to members within
  // active_feedback_radius_hops ask them to multiply its probe weight by
  // active_feedback_boost for active_feedback_hold. 0 s gap: off.
  core::Duration active_feedback_gap = std::chrono::seconds(8);
  double active_feedback_alpha = 0.125;
  uint32_t active_feedback_radius_hops = 2;
  double active_feedback_boost = 4.0;
  core::Duration active_feedback_hold = std::chrono::seconds(30);

  // Suspicion (Lifeguard): starts at max = suspicion_max_mult * min and
  // shrinks toward min = suspicion_mult * max(1, log10 N) * probe_period as
  // independent accusers confirm it.
  double suspicion_mult = 4.0;
  double suspicion_max_mult = 6.0;
  // Accusers (after the first) at which the timeout reaches min.
  size_t suspicion_confirmations = 3;

  // Lifeguard local health: 0 = healthy; probe period and timeout are
  // multiplied by (score + 1).
  uint32_t max_local_health = 8;

  // Dissemination: each update is piggy-backed retransmit_mult *
  // ceil(log10(N + 1)) times.
  uint32_t retransmit_mult = 4;
  size_t max_piggyback = 16;           // updates per message
  size_t max_message_bytes = 1100;     // membership body bytes per message

  // Join and anti-entropy.
  core::Duration join_retry = std::chrono::seconds(2);     // retry with the next contact
  core::Duration push_pull_interval = std::chrono::seconds(30);
  // Above this many live members the push-pull interval is multiplied by
  // ceil(log2(N) - log2(threshold)) + 1 (memberlist's pushPullScale: x3 at
  // N = 100, x5 at 400); 0 keeps it fixed.
  size_t push_pull_scale_threshold = 32;
  // After this node learns of a joined member, this many push-pulls run at
  // the unscaled interval.
  uint32_t push_pull_fast_rounds = 2;
  // Digest-based push-pull: a sync request carries per-bucket hashes of the
  // requester's table (membership/member_digest.h), about this many members
  // per bucket, at most CodecLimits::max_digest_buckets buckets; only the
  // members of buckets that differ travel back, and nothing when all match.
  // Smaller buckets send fewer needless records per difference but a longer
  // digest. 0: whole lists (as an older node asks).
  size_t push_pull_members_per_bucket = 4;
  // Serf-style reconnect: every interval, probe one failed member so lists
  // merge after a partition heals (the probe carries the member's failed
  // record; a live member refutes it).
  core::Duration reconnect_interval = std::chrono::seconds(10);
  core::Duration failed_retention = std::chrono::hours(1);  // failed/left records kept this long
  core::Duration sync_request_deadline = std::chrono::seconds(5);
  // Members pushed by a graceful leave directly (then piggy-backing does the rest).
  size_t leave_fanout = 4;
  // Random members (besides the accuser) told a refutation directly.
  size_t refute_fanout = 2;

  // Metadata: a name and a small key/value slot.
  size_t max_name_bytes = 64;
  size_t max_metadata_entries = 16;
  size_t max_metadata_bytes = 384;  // sum of key and value lengths
};

}  // namespace mesh::membership
