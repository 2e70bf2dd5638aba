#include "agent/runtime/file_storage.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "core/log.h"

namespace mesh::agent {
namespace {

constexpr std::string_view kTmpSuffix = ".tmp";
// DIR/removed-<n>.tmp: a subtree remove_prefix() renamed away, to delete.
constexpr std::string_view kRemovedPrefix = "removed-";
constexpr mode_t kStorageDirectoryMode = 0700;
constexpr mode_t kFileMode = 0600;

std::string errno_text(int error) { return std::strerror(error); }

// Retries on EINTR, which a signal (SIGTERM to the agent) can cause.
template <typename F>
auto retry(F f) {
  decltype(f()) result;
  do {
    result = f();
  } while (result < 0 && errno == EINTR);
  return result;
}

std::string parent_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// A rename or unlink is durable only once the directory holding it is.
bool sync_directory(const std::string& directory) {
  const int fd = retry([&] { return ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); });
  if (fd < 0) return false;
  const int result = retry([&] { return ::fsync(fd); });
  ::close(fd);
  return result == 0;
}

// mkdir -p with mode 0700; each newly created directory is made durable in
// its parent. Returns 0 or the errno of the failure.
int make_directories(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0) return S_ISDIR(info.st_mode) ? 0 : ENOTDIR;
  if (errno != ENOENT) return errno;
  const std::string parent = parent_of(path);
  if (parent != path) {
    if (const int error = make_directories(parent); error != 0) return error;
  }
  if (::mkdir(path.c_str(), kStorageDirectoryMode) != 0) {
    if (errno == EEXIST) return 0;
    return errno;
  }
  sync_directory(parent);
  return 0;
}

bool ends_with_tmp(std::string_view name) { return name.ends_with(kTmpSuffix); }

}  // namespace

std::string FileStorage::key_error(std::string_view key) {
  if (key.empty()) return "empty key";
  if (key.front() == '/') return "absolute path";
  if (key.find('\0') != std::string_view::npos) return "NUL character";
  size_t start = 0;
  while (true) {
    const size_t slash = key.find('/', start);
    const std::string_view component = key.substr(start, slash == std::string_view::npos ? key.npos : slash - start);
    if (component.empty()) return "empty path component";
    if (component == "." || component == "..") return fmt::format("'{}' component", component);
    if (ends_with_tmp(component)) return fmt::format("component ending in '{}' (reserved for writes in flight)", kTmpSuffix);
    if (slash == std::string_view::npos) return {};
    start = slash + 1;
  }
}

std::string FileStorage::prefix_error(std::string_view prefix) {
  if (!prefix.ends_with('/')) return "a subtree prefix must end in '/'";
  return key_error(prefix.substr(0, prefix.size() - 1));
}

FileStorage::FileStorage(std::string directory) : directory_(std::move(directory)) {
  if (directory_.empty()) {
    throw std::runtime_error("storage directory is empty; set data_dir in the config (e.g. /var/lib/meshagent)");
  }
  while (directory_.size() > 1 && directory_.back() == '/') directory_.pop_back();
  if (const int error = make_directories(directory_); error != 0) {
    throw std::runtime_error(fmt::format(
        "cannot create storage directory {}: {}; create it and give the agent's user write access, or point "
        "data_dir in the config somewhere writable",
        directory_, errno_text(error)));
  }
  if (::access(directory_.c_str(), W_OK | X_OK) != 0) {
    throw std::runtime_error(fmt::format(
        "storage directory {} is not writable: {}; give the agent's user write access (chown/chmod) or point "
        "data_dir in the config somewhere writable",
        directory_, errno_text(errno)));
  }
  // Writes interrupted by a crash leave KEY.tmp behind; KEY still holds the
  // previous value, so the leftover is garbage.
  std::error_code error;
  std::vector<std::filesystem::path> leftovers;
  for (auto it = std::filesystem::recursive_directory_iterator(directory_, error);
       !error && it != std::filesystem::recursive_directory_iterator(); it.increment(error)) {
    if (it->is_regular_file(error) && ends_with_tmp(it->path().filename().string())) leftovers.push_back(it->path());
    if (it->is_directory(error) && ends_with_tmp(it->path().filename().string())) it.disable_recursion_pending();
  }
  for (const auto& path : leftovers) {
    std::filesystem::remove(path, error);
    core::log("agent").info("storage removed interrupted write file={}", path.string());
  }
  // Subtrees removed before a crash, not yet deleted.
  sweep_removed();
}

void FileStorage::sweep_removed() {
  std::error_code error;
  std::vector<std::filesystem::path> removed;
  for (auto it = std::filesystem::directory_iterator(directory_, error);
       !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.starts_with(kRemovedPrefix) && ends_with_tmp(name) && it->is_directory(error)) removed.push_back(it->path());
  }
  for (const auto& path : removed) {
    std::filesystem::remove_all(path, error);
    if (error) core::log("agent").warn("storage could not delete removed subtree dir={} error={}", path.string(), error.message());
  }
}

core::StoredValue FileStorage::read(std::string_view key) const {
  if (const std::string problem = key_error(key); !problem.empty()) {
    core::log("agent").warn("storage get refused key={} reason={}", key, problem);
    return {};
  }
  const std::string path = path_of(key);
  const int fd = retry([&] { return ::open(path.c_str(), O_RDONLY | O_CLOEXEC); });
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return {};
    // The file exists but cannot be read (EIO from a failing card, EACCES):
    // what it held is unknown, which is damage, not absence.
    core::log("agent").warn("storage read failed key={} file={} error={}", key, path, errno_text(errno));
    return {core::ReadStatus::damaged, {}};
  }
  std::string value;
  char buffer[8192];
  while (true) {
    const ssize_t n = retry([&] { return ::read(fd, buffer, sizeof buffer); });
    if (n < 0) {
      core::log("agent").warn("storage read failed key={} file={} error={}", key, path, errno_text(errno));
      ::close(fd);
      return {core::ReadStatus::damaged, {}};
    }
    if (n == 0) break;
    value.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return {core::ReadStatus::found, std::move(value)};
}

namespace {

// Writes `value` to a new file at `path` and fsyncs it; 0 or the errno, with
// the failed step.
int write_durable_file(const std::string& path, std::string_view value, std::string_view& step) {
  step = "open";
  const int fd = retry([&] { return ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, kFileMode); });
  if (fd < 0) return errno;
  size_t written = 0;
  step = "write";
  while (written < value.size()) {
    const ssize_t n = retry([&] { return ::write(fd, value.data() + written, value.size() - written); });
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      return error;
    }
    written += static_cast<size_t>(n);
  }
  step = "fsync";
  if (retry([&] { return ::fsync(fd); }) != 0) {
    const int error = errno;
    ::close(fd);
    return error;
  }
  step = "close";
  if (::close(fd) != 0) return errno;
  return 0;
}

}  // namespace

FileStorage::CommitResult FileStorage::commit(const std::vector<Change>& changes) {
  for (const Change& change : changes) {
    if (const std::string problem = change.subtree ? prefix_error(change.key) : key_error(change.key);
        !problem.empty()) {
      core::log("agent").error("storage commit given an invalid key={} reason={}", change.key, problem);
      return CommitResult::fatal;
    }
  }
  // A value put under a subtree removed earlier in the batch would have its
  // new file carried away with the subtree: commit the batch in two parts.
  // (Committing a part again is harmless, so `retry` still means the whole.)
  for (size_t i = 0; i < changes.size(); ++i) {
    if (!changes[i].subtree) continue;
    for (size_t j = i + 1; j < changes.size(); ++j) {
      if (!changes[j].value || !changes[j].key.starts_with(changes[i].key)) continue;
      const CommitResult first = commit(std::vector<Change>(changes.begin(), changes.begin() + j));
      if (first != CommitResult::durable) return first;
      return commit(std::vector<Change>(changes.begin() + j, changes.end()));
    }
  }
  // 1. Every new value into a file of its own, durable before any rename, so
  //    that the renames below can only ever expose complete values.
  std::vector<std::string> tmp_paths(changes.size());
  auto remove_tmp_files = [&] {
    for (const std::string& tmp : tmp_paths) {
      if (!tmp.empty()) ::unlink(tmp.c_str());
    }
  };
  for (size_t i = 0; i < changes.size(); ++i) {
    const Change& change = changes[i];
    if (!change.value || change.subtree) continue;
    const std::string path = path_of(change.key);
    std::string_view step = "mkdir";
    int error = make_directories(parent_of(path));
    if (error == 0) {
      tmp_paths[i] = fmt::format("{}.{}{}", path, i, kTmpSuffix);
      error = write_durable_file(tmp_paths[i], *change.value, step);
    }
    if (error != 0) {
      core::log("agent").warn("storage write failed key={} file={} step={} error={}", change.key, path, step,
                              errno_text(error));
      remove_tmp_files();
      return CommitResult::retry;
    }
  }
  // 2. The renames and unlinks, in the order the changes were made.
  std::vector<std::string> directories;
  // A rename or unlink that fails leaves the disk part-way through the batch.
  auto fatal = [&](std::string_view step, const Change& change, const std::string& path) {
    core::log("agent").error("storage commit failed key={} file={} step={} error={}", change.key, path, step,
                             errno_text(errno));
    remove_tmp_files();
    return CommitResult::fatal;
  };
  for (size_t i = 0; i < changes.size(); ++i) {
    const Change& change = changes[i];
    const std::string path =
        change.subtree ? path_of(std::string_view(change.key).substr(0, change.key.size() - 1)) : path_of(change.key);
    bool changed_directory = true;
    if (change.subtree) {
      // One rename takes the whole subtree away, atomically; deleting its
      // files is left to sweep_removed(), off the durable path.
      const std::string removed =
          fmt::format("{}/{}{}{}", directory_, kRemovedPrefix, removed_count_.fetch_add(1), kTmpSuffix);
      if (::rename(path.c_str(), removed.c_str()) != 0) {
        if (errno != ENOENT && errno != ENOTDIR) return fatal("rename-subtree", change, path);
        changed_directory = false;  // nothing was there
      } else {
        // Changes made inside it earlier in the batch went with it.
        std::erase_if(directories, [&](const std::string& d) { return d == path || d.starts_with(path + "/"); });
        if (std::find(directories.begin(), directories.end(), directory_) == directories.end()) {
          directories.push_back(directory_);
        }
      }
    } else if (change.value) {
      if (::rename(tmp_paths[i].c_str(), path.c_str()) != 0) return fatal("rename", change, path);
      tmp_paths[i].clear();
    } else if (::unlink(path.c_str()) != 0) {
      if (errno != ENOENT && errno != ENOTDIR) return fatal("unlink", change, path);
      changed_directory = false;  // nothing was there
    }
    const std::string parent = parent_of(path);
    if (changed_directory && std::find(directories.begin(), directories.end(), parent) == directories.end()) {
      directories.push_back(parent);
    }
  }
  // 3. The directories, which make the renames and unlinks durable.
  for (const std::string& directory : directories) {
    if (!sync_directory(directory)) {
      core::log("agent").error("storage commit failed directory={} step=fsync-directory error={}", directory,
                               errno_text(errno));
      return CommitResult::fatal;
    }
  }
  return CommitResult::durable;
}

bool FileStorage::put(std::string_view key, std::string_view value) {
  if (const std::string problem = key_error(key); !problem.empty()) {
    core::log("agent").warn("storage put refused key={} reason={}", key, problem);
    return false;
  }
  return commit({Change{std::string(key), std::string(value)}}) == CommitResult::durable;
}

bool FileStorage::remove(std::string_view key) {
  if (const std::string problem = key_error(key); !problem.empty()) {
    core::log("agent").warn("storage remove refused key={} reason={}", key, problem);
    return false;
  }
  return commit({Change{std::string(key), std::nullopt}}) == CommitResult::durable;
}

bool FileStorage::remove_prefix(std::string_view prefix) {
  if (const std::string problem = prefix_error(prefix); !problem.empty()) {
    core::log("agent").warn("storage remove refused prefix={} reason={}", prefix, problem);
    return false;
  }
  const bool ok = commit({Change{std::string(prefix), std::nullopt, true}}) == CommitResult::durable;
  sweep_removed();
  return ok;
}

std::vector<std::string> FileStorage::keys(std::string_view prefix) const {
  // Walk only the subtree the prefix can match: "kgroup/abc/l" starts at
  // DIR/kgroup/abc.
  std::string start = directory_;
  if (const size_t slash = prefix.rfind('/'); slash != std::string_view::npos) {
    const std::string_view sub = prefix.substr(0, slash);
    if (key_error(sub).empty()) start = path_of(sub);
  }
  std::vector<std::string> out;
  std::error_code error;
  const std::filesystem::path root(directory_);
  for (auto it = std::filesystem::recursive_directory_iterator(start, error);
       !error && it != std::filesystem::recursive_directory_iterator(); it.increment(error)) {
    if (it->is_directory(error) && ends_with_tmp(it->path().filename().string())) {
      it.disable_recursion_pending();  // a removed subtree
      continue;
    }
    if (!it->is_regular_file(error)) continue;
    std::string key = it->path().lexically_relative(root).generic_string();
    if (!key_error(key).empty()) continue;  // a .tmp of a write in flight, or a stray file
    if (key.starts_with(prefix)) out.push_back(std::move(key));
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace mesh::agent
