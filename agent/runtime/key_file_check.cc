#include "agent/runtime/key_file_check.h"

#include <sys/stat.h>

#include <fmt/format.h>

namespace mesh::agent {

std::optional<std::string> key_file_mode_problem(const std::string& path, unsigned mode) {
  constexpr unsigned kGroupOrOthers = 0077;
  if ((mode & kGroupOrOthers) == 0) return std::nullopt;
  const char* who = (mode & 0070) != 0 && (mode & 0007) != 0 ? "its group and all other users"
                    : (mode & 0070) != 0                     ? "its group"
                                                             : "all other users";
  return fmt::format(
      "mesh key file {0} has mode {1:04o}: {2} can access it, and whoever reads the mesh key can forge traffic "
      "for the whole mesh. Fix: chmod 600 {0} (and make it owned by the user meshagent runs as: chown "
      "meshagent:meshagent {0} for the packaged service, root when run as root)",
      path, mode & 07777, who);
}

std::optional<std::string> check_key_file_permissions(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return std::nullopt;
  return key_file_mode_problem(path, static_cast<unsigned>(info.st_mode) & 07777U);
}

}  // namespace mesh::agent
