#include "agent/runtime/key_file_check.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace mesh::agent {
namespace {

TEST(KeyFileCheckTest, AcceptsModesWithoutGroupOrOtherAccess) {
  EXPECT_FALSE(key_file_mode_problem("k", 0600));
  EXPECT_FALSE(key_file_mode_problem("k", 0400));
  EXPECT_FALSE(key_file_mode_problem("k", 0700));
}

TEST(KeyFileCheckTest, RefusesGroupOrOtherAccessAndSaysHowToFixIt) {
  for (const unsigned mode : {0644U, 0640U, 0604U, 0660U, 0602U, 0620U, 0666U}) {
    const auto problem = key_file_mode_problem("/etc/meshagent/mesh.key", mode);
    ASSERT_TRUE(problem) << std::oct << mode;
    EXPECT_NE(problem->find("chmod 600 /etc/meshagent/mesh.key"), std::string::npos) << *problem;
    EXPECT_NE(problem->find("chown meshagent:meshagent"), std::string::npos) << *problem;
  }
  EXPECT_NE(key_file_mode_problem("k", 0644)->find("mode 0644"), std::string::npos);
  EXPECT_NE(key_file_mode_problem("k", 0640)->find("its group can"), std::string::npos);
  EXPECT_NE(key_file_mode_problem("k", 0604)->find("all other users can"), std::string::npos);
}

TEST(KeyFileCheckTest, ChecksTheFileOnDisk) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("mesh_key_check_" + std::to_string(::getpid()))).string();
  std::ofstream(path) << "00\n";
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  const auto problem = check_key_file_permissions(path);
  ASSERT_TRUE(problem);
  EXPECT_NE(problem->find("chmod 600 " + path), std::string::npos);
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  EXPECT_FALSE(check_key_file_permissions(path));
  std::filesystem::remove(path);
  // A missing file is reported by reading it, not here.
  EXPECT_FALSE(check_key_file_permissions(path));
}

}  // namespace
}  // namespace mesh::agent
