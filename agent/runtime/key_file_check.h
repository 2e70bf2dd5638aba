#pragma once

#include <optional>
#include <string>

namespace mesh::agent {

// The mesh key authenticates every agent datagram: whoever can read the file
// can forge traffic for the whole mesh. The agent refuses to start (and
// --check-config fails) when the key file grants any access to its group or
// to others. Returns the message to print, naming the fix, or nullopt when
// the mode is fine or the file cannot be stat()ed (reading it reports that).
std::optional<std::string> check_key_file_permissions(const std::string& path);

// The same test on a mode already known (st_mode & 07777), for unit tests.
std::optional<std::string> key_file_mode_problem(const std::string& path, unsigned mode);

}  // namespace mesh::agent
