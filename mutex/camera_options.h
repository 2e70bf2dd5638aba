#pragma once

#include <cstddef>
#include <cstdint>

#include "core/messenger.h"
#include "core/time.h"

namespace mesh::mutex {

enum class Algorithm {
  camera,           // Algorithm 2 (+ Algorithm 3 when the Mutual Friend Property may not hold)
  ricart_agrawala,  // plain Ricart-Agrawala (Algorithm 1): the paper's counter-example, for tests
};

struct NetworkSizeOptions {
  // Node ids heard of (member lists, requests, OK sets) within this window
  // count towards the estimate; older ones are forgotten, so the estimate
  // follows a mesh that shrinks for good.
  core::Duration window = std::chrono::minutes(10);
  // N.upper = ceil(distinct ids in the window * (1 + margin)): ids a node
  // never heard of are covered by the margin.
  double margin = 0.25;
  // A configured lower bound on N.upper (the deployment's expected size);
  // a node that only ever saw a small corner of the mesh relies on it.
  size_t floor = 0;
};

struct CameraOptions {
  Algorithm algorithm = Algorithm::camera;
  // Retransmission of REQUEST, JOIN and the tree messages. A peer that gives
  // no answer by the deadline is asked again while membership lists it as
  // live (the paper waits for the failure detector), and given up when it
  // does not.
  core::RetryPolicy retry;
  // A tree node waiting for the subtree OK of a child that its member list
  // does not show (so no failure event would ever name it) probes it this
  // often.
  core::Duration probe_interval = std::chrono::seconds(5);
  // f: simultaneous failures the slow-path tree repairs by adoption; each
  // node keeps its subtree f + 1 levels deep. More failures rebuild the tree.
  uint32_t tolerated_failures = 1;
  NetworkSizeOptions network_size;
  // Never take the slow path (benchmarks of the fast path alone).
  bool slow_path_enabled = true;
  // Holder lease: a grant stops counting as held (Camera::held) once this
  // node has gone this long without a majority of the nodes it knows
  // answering it, and stays lapsed until released. Others forget a silent
  // node only after retry.deadline of silence, so a holder cut off from the
  // mesh lets go before the rest may grant again; keep it well under
  // retry.deadline (the gap covers a command already on its way). From half
  // of this into a hold on, the holder probes every known node it has not
  // heard answer within a quarter of this. 0 turns the lease off.
  core::Duration hold_lease = std::chrono::seconds(5);
  // Resource names are short labels ("pump", "amps/floor2").
  size_t max_resource_name = 128;
  // When membership declares failed a node whose request this node OKed and
  // never saw released, that node may hold a token nobody else saw; later
  // grants start this far above the local high-water mark.
  uint64_t failed_holder_token_gap = uint64_t{1} << 20;
  // The persisted token reservation runs this far ahead of the high-water
  // mark: one storage write per this many tokens, and a restarted node's
  // tokens skip at most this many values.
  uint64_t token_block = 1024;
  // Node ids remembered across restarts (whom a restarted node asks while
  // its member list is partial); ids beyond this many are not remembered.
  size_t max_known_nodes = 1024;
  // For this long after start, a request whose member list (remembered
  // nodes included) holds no other node, or no more than N.upper / 2 nodes,
  // waits for membership to grow (a joined member, a requester heard of)
  // instead of granting unasked or taking the slow path over a membership
  // graph that may still be in pieces. After it, a node really alone grants
  // at once and a small list takes the slow path. 0 turns the wait off.
  core::Duration boot_grace = std::chrono::seconds(15);
  // Within boot_grace, and only when network_size.floor is not set (then
  // N.upper is an upper bound and the rule above suffices): a request also
  // waits until the member list has not grown for this long. Two booting
  // nodes whose lists are disjoint corners of the mesh (a line: {n1, n2} and
  // {n3, n4}) are each a "majority" of what they know and would both grant;
  // while lists still grow, they are not the mesh yet. 0 turns it off.
  core::Duration boot_settle = std::chrono::seconds(5);
  // An OK (the MutexBody bytes) is kept within this many bytes so that with
  // the envelope and authentication it stays one datagram; when the
  // recently-OKed set would not fit, the OKing node relays the request to
  // the set's nodes instead (camera_ok_relay.cc). Must exceed an OK without
  // a set (about 40 bytes plus the resource name).
  size_t max_ok_bytes = 1000;
};

}  // namespace mesh::mutex
