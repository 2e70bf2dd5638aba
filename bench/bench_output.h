#pragma once

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <vector>

// What the whole-agent benchmarks (device_bench, routine_bench) share to
// summarise samples and write their CSV files.
namespace mesh::bench {

// The q-quantile of `values` by rank (0 for no samples).
inline double quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(q * static_cast<double>(values.size() - 1))];
}

// DIR/name, where DIR is the value of the environment variable `dir_variable`,
// opened for appending; truncated (and given `header`) the first time this
// process opens it. Not open when the variable is unset.
inline std::ofstream open_output(const char* dir_variable, const std::string& name, const std::string& header) {
  const char* dir = std::getenv(dir_variable);
  if (dir == nullptr) return {};
  static std::set<std::string> opened;
  const std::string path = std::string(dir) + "/" + name;
  const bool first = opened.insert(path).second;
  std::ofstream out(path, first ? std::ios::trunc : std::ios::app);
  if (first) out << header << "\n";
  return out;
}

}  // namespace mesh::bench
