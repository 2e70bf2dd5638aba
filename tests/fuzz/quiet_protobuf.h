// Hostile strings make protobuf log every invalid UTF-8 field it parses; the
// decoders under fuzzing refuse them, so in a fuzz target that log is only
// noise (and slows the run). Call at the top of LLVMFuzzerTestOneInput.
#pragma once

#include <string>

#include <google/protobuf/stubs/logging.h>

namespace mesh::fuzz {

inline void quiet_protobuf_log() {
  static const bool quiet =
      (google::protobuf::SetLogHandler([](google::protobuf::LogLevel, const char*, int, const std::string&) {}), true);
  (void)quiet;
}

}  // namespace mesh::fuzz
