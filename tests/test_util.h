// Shared helpers for tests: where the repo and ../shared are, and skipping when shared is absent.
#pragma once
#include <gtest/gtest.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include <sys/wait.h>
#include <unistd.h>

namespace ears::test {

inline std::filesystem::path source_dir() { return EARS_SOURCE_DIR; }

// ../shared beside the checkout (or $EARS_SHARED_DIR). Empty path when absent.
inline std::filesystem::path shared_dir() {
  if (const char* env = std::getenv("EARS_SHARED_DIR")) return env;
  auto p = source_dir().parent_path() / "shared";
  return std::filesystem::exists(p) ? p : std::filesystem::path();
}

// The built ears-bench executable (ctest sets EARS_BENCH_EXE).
inline std::string exe() {
  const char* e = std::getenv("EARS_BENCH_EXE");
  return e ? e : "";
}

struct CommandResult {
  int exit_code = -1;
  std::string out, err;
};

// Runs `ears-bench <args>` through the shell, capturing stdout and stderr (args are shell words).
inline CommandResult run_ears(const std::string& args) {
  static int counter = 0;
  const auto dir = std::filesystem::temp_directory_path();
  const std::string tag = std::to_string(::getpid()) + "_" + std::to_string(counter++);
  const auto out = dir / ("ears_out_" + tag), err = dir / ("ears_err_" + tag);
  const std::string cmd = "'" + exe() + "' " + args + " >'" + out.string() + "' 2>'" + err.string() + "'";
  const int status = std::system(cmd.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream o(out), e(err);
  std::stringstream so, se;
  so << o.rdbuf();
  se << e.rdbuf();
  r.out = so.str();
  r.err = se.str();
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

// A fresh empty directory under the system temp dir, removed when the test binary exits.
inline std::filesystem::path temp_dir(const std::string& name) {
  struct Cleanup {
    std::vector<std::filesystem::path> dirs;
    ~Cleanup() {
      std::error_code ec;
      for (const auto& d : dirs) std::filesystem::remove_all(d, ec);
    }
  };
  static Cleanup cleanup;
  static int counter = 0;
  auto p = std::filesystem::temp_directory_path() /
           ("ears_" + name + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  cleanup.dirs.push_back(p);
  return p;
}

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace ears::test

// Skips the current test with a clear message when ../shared (or the sub-path) is missing.
#define EARS_REQUIRE_SHARED(subpath)                                                          \
  do {                                                                                        \
    if (::ears::test::shared_dir().empty() ||                                                 \
        !std::filesystem::exists(::ears::test::shared_dir() / (subpath)))                     \
      GTEST_SKIP() << "needs ../shared/" << (subpath)                                         \
                   << " beside the checkout (or EARS_SHARED_DIR); not found, skipping";       \
  } while (0)
