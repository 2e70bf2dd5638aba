// What the agent's storage costs the event loop. The same burst of k-group
// changes (an entry and the log's meta per client write, 200-byte values)
// goes to disk two ways in each iteration:
//   BM_SynchronousPutBaseline: FileStorage::put one change after another, on
//     the caller's thread: what the agent did before WriteBehindStorage, an
//     fsync, a rename and a directory fsync per change;
//   BM_WriteBehind: WriteBehindStorage, the agent's storage now: the caller
//     only queues; a writer thread group-commits.
// Counters, per iteration of `writes` client writes (2 changes each):
//   loop_blocked_max_us  the longest a single put() kept the caller (the
//                        event loop) from running: the stall that made the
//                        chaos runs' agents miss their pings;
//   durable_ms           from the first put to all changes durable;
//   commits              fsync rounds the writer needed.
// Read WriteBehind against the baseline of the same run: durable_ms /
// baseline durable_ms is the group-commit speed-up, and loop_blocked_max_us /
// the baseline's is how much less the event loop waits (both on the same
// disk, in the same minute).
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <string>

#include "agent/runtime/file_storage.h"
#include "agent/runtime/write_behind_storage.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

class ScratchDirectory {
 public:
  ScratchDirectory() {
    // Beside the build, on the disk the agent's data would share, not /tmp
    // (often tmpfs, where fsync is free).
    std::string pattern = (fs::current_path() / "storage_bench.").string() + std::string(6, 'X');
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed in " + fs::current_path().string());
    path_ = pattern;
  }
  ~ScratchDirectory() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

const std::string kValue(200, 'v');

std::string entry_key(int64_t seq) { return "kgroup/bench/log/" + std::to_string(seq); }

double micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

// Runs the burst once per iteration through `put`, then `make_durable`, and
// reports the counters above; `commits` says how many fsync rounds it took.
template <typename Put, typename MakeDurable, typename Commits>
void run_bursts(benchmark::State& state, Put put, MakeDurable make_durable, Commits commits) {
  const int64_t writes = state.range(0);
  double blocked_max_us = 0;
  double durable_ms = 0;
  int64_t round = 0;
  const uint64_t commits_before = commits();
  for (auto _ : state) {
    const auto started = Clock::now();
    for (int64_t i = 0; i < writes; ++i) {
      for (const std::string& key : {entry_key(round * writes + i), std::string("kgroup/bench/meta")}) {
        const auto before = Clock::now();
        if (!put(key)) state.SkipWithError("put failed");
        blocked_max_us = std::max(blocked_max_us, micros(Clock::now() - before));
      }
    }
    if (!make_durable()) state.SkipWithError("flush failed");
    durable_ms += micros(Clock::now() - started) / 1000.0;
    ++round;
  }
  state.counters["loop_blocked_max_us"] = blocked_max_us;
  state.counters["durable_ms"] = durable_ms / static_cast<double>(round);
  state.counters["commits"] = static_cast<double>(commits() - commits_before) / static_cast<double>(round);
}

void BM_SynchronousPutBaseline(benchmark::State& state) {
  ScratchDirectory scratch;
  mesh::agent::FileStorage files(scratch.path());
  uint64_t puts = 0;  // each one its own fsync round
  auto put = [&](const std::string& key) {
    ++puts;
    return files.put(key, kValue);
  };
  run_bursts(state, put, [] { return true; }, [&] { return puts; });
}
BENCHMARK(BM_SynchronousPutBaseline)->ArgName("writes")->Arg(1)->Arg(16)->Arg(128)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_WriteBehind(benchmark::State& state) {
  ScratchDirectory scratch;
  mesh::agent::FileStorage files(scratch.path());
  // Nothing waits on the loop here: the posted releases are dropped.
  mesh::agent::WriteBehindStorage storage(
      files, [](std::function<void()>) {}, [&state](const std::string& why) { state.SkipWithError(why.c_str()); });
  run_bursts(
      state, [&](const std::string& key) { return storage.put(key, kValue); }, [&] { return storage.flush(); },
      [&] { return storage.stats().commits; });
}
BENCHMARK(BM_WriteBehind)->ArgName("writes")->Arg(1)->Arg(16)->Arg(128)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
