// The main() of a fuzz target when it is not built with libFuzzer: runs every
// corpus input through LLVMFuzzerTestOneInput, then a fixed, seeded stream of
// mutations of them, so every ordinary build and test run exercises the
// decoders with hostile bytes. A crash or abort() in the target fails the
// test like a libFuzzer finding would; the summary names the seed to replay.
//
//   target [--mutations=N] [--seed=S] [--max-len=L] corpus_dir_or_file...

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

using Bytes = std::vector<uint8_t>;

// A local xorshift64*: the driver links into targets of every layer, so it
// depends on nothing but the standard library, and its stream is the same
// on every platform.
class XorShift {
 public:
  explicit XorShift(uint64_t seed) : state_(seed ? seed : 0x9e3779b97f4a7c15ULL) {}
  uint64_t next() {
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return state_ * 0x2545f4914f6cdd1dULL;
  }
  // Uniform enough in [0, bound) for mutation choices; bound > 0.
  size_t below(size_t bound) { return static_cast<size_t>(next() % bound); }

 private:
  uint64_t state_;
};

struct Options {
  uint64_t mutations = 0;
  uint64_t seed = 1;
  size_t max_len = 4096;
  std::vector<std::string> paths;
};

bool parse_number(std::string_view text, uint64_t& out) {
  if (text.empty()) return false;
  uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  out = value;
  return true;
}

bool parse_args(int argc, char** argv, Options& options) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    uint64_t value = 0;
    if (arg.starts_with("--mutations=")) {
      if (!parse_number(arg.substr(12), options.mutations)) return false;
    } else if (arg.starts_with("--seed=")) {
      if (!parse_number(arg.substr(7), options.seed)) return false;
    } else if (arg.starts_with("--max-len=")) {
      if (!parse_number(arg.substr(10), value) || value == 0) return false;
      options.max_len = static_cast<size_t>(value);
    } else if (arg.starts_with("-")) {
      return false;
    } else {
      options.paths.emplace_back(arg);
    }
  }
  return true;
}

bool read_file(const std::filesystem::path& path, Bytes& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

// Files of every directory (recursively, sorted, so runs repeat exactly) and
// every named file.
bool load_corpus(const std::vector<std::string>& paths, std::vector<Bytes>& corpus) {
  for (const auto& name : paths) {
    std::error_code ec;
    const std::filesystem::path path(name);
    std::vector<std::filesystem::path> files;
    if (std::filesystem::is_directory(path, ec)) {
      for (const auto& entry : std::filesystem::recursive_directory_iterator(path, ec)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
      if (ec) {
        std::fprintf(stderr, "replay: cannot list %s: %s\n", name.c_str(), ec.message().c_str());
        return false;
      }
      std::sort(files.begin(), files.end());
    } else if (std::filesystem::is_regular_file(path, ec)) {
      files.push_back(path);
    } else {
      std::fprintf(stderr, "replay: corpus path %s does not exist\n", name.c_str());
      return false;
    }
    for (const auto& file : files) {
      Bytes bytes;
      if (!read_file(file, bytes)) {
        std::fprintf(stderr, "replay: cannot read %s\n", file.string().c_str());
        return false;
      }
      corpus.push_back(std::move(bytes));
    }
  }
  return true;
}

void run(const Bytes& input) {
  // A copy in a buffer of exactly its size, so reads past the end are caught
  // by sanitizers as they would be under libFuzzer.
  std::unique_ptr<uint8_t[]> exact(new uint8_t[std::max<size_t>(input.size(), 1)]);
  std::copy(input.begin(), input.end(), exact.get());
  LLVMFuzzerTestOneInput(exact.get(), input.size());
}

void mutate_once(Bytes& data, const std::vector<Bytes>& corpus, XorShift& rng, size_t max_len) {
  static constexpr uint8_t kInteresting[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 0x08, 0x0a, 0x10, 0x12, 0x82};
  switch (rng.below(7)) {
    case 0:  // flip one bit
      if (!data.empty()) data[rng.below(data.size())] ^= static_cast<uint8_t>(1u << rng.below(8));
      break;
    case 1:  // set a byte to a random or boundary value
      if (!data.empty()) {
        data[rng.below(data.size())] = rng.below(2) ? static_cast<uint8_t>(rng.next())
                                                    : kInteresting[rng.below(std::size(kInteresting))];
      }
      break;
    case 2:  // truncate
      if (!data.empty()) data.resize(rng.below(data.size()));
      break;
    case 3: {  // insert random bytes
      const size_t at = rng.below(data.size() + 1);
      const size_t n = 1 + rng.below(8);
      Bytes extra(n);
      for (auto& b : extra) b = static_cast<uint8_t>(rng.next());
      data.insert(data.begin() + static_cast<std::ptrdiff_t>(at), extra.begin(), extra.end());
      break;
    }
    case 4: {  // duplicate a range
      if (data.empty()) break;
      const size_t from = rng.below(data.size());
      const size_t n = 1 + rng.below(data.size() - from);
      const Bytes range(data.begin() + static_cast<std::ptrdiff_t>(from),
                        data.begin() + static_cast<std::ptrdiff_t>(from + n));
      const size_t at = rng.below(data.size() + 1);
      data.insert(data.begin() + static_cast<std::ptrdiff_t>(at), range.begin(), range.end());
      break;
    }
    case 5: {  // erase a range
      if (data.empty()) break;
      const size_t from = rng.below(data.size());
      const size_t n = 1 + rng.below(data.size() - from);
      data.erase(data.begin() + static_cast<std::ptrdiff_t>(from),
                 data.begin() + static_cast<std::ptrdiff_t>(from + n));
      break;
    }
    default: {  // splice: a head of this input and a tail of another
      const Bytes& other = corpus[rng.below(corpus.size())];
      const size_t head = rng.below(data.size() + 1);
      const size_t tail_from = rng.below(other.size() + 1);
      data.resize(head);
      data.insert(data.end(), other.begin() + static_cast<std::ptrdiff_t>(tail_from), other.end());
      break;
    }
  }
  if (data.size() > max_len) data.resize(max_len);
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!parse_args(argc, argv, options)) {
    std::fprintf(stderr, "usage: %s [--mutations=N] [--seed=S] [--max-len=L] corpus_dir_or_file...\n", argv[0]);
    return 2;
  }
  std::vector<Bytes> corpus;
  if (!load_corpus(options.paths, corpus)) return 1;
  if (corpus.empty()) {
    std::fprintf(stderr, "replay: empty corpus; give at least one non-empty directory or file\n");
    return 1;
  }

  for (const auto& input : corpus) run(input);

  XorShift rng(options.seed);
  size_t bytes = 0;
  for (uint64_t i = 0; i < options.mutations; ++i) {
    Bytes data = corpus[rng.below(corpus.size())];
    const size_t rounds = 1 + rng.below(4);
    for (size_t r = 0; r < rounds; ++r) mutate_once(data, corpus, rng, options.max_len);
    bytes += data.size();
    run(data);
  }
  std::printf("replay: %zu corpus inputs, %llu mutations (seed %llu, %zu mutated bytes), no crash\n", corpus.size(),
              static_cast<unsigned long long>(options.mutations), static_cast<unsigned long long>(options.seed),
              bytes);
  return 0;
}
