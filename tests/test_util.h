// Shared helpers for tests: where the repo and ../shared are, and skipping when shared is absent.
#pragma once
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include <sys/wait.h>
#include <unistd.h>

namespace ears::test {

// Sets an environment variable for the scope, restoring the old value.
struct ScopedEnv {
  std::string name;
  std::optional<std::string> old;
  ScopedEnv(std::string n, const std::optional<std::string>& value) : name(std::move(n)) {
    if (const char* v = std::getenv(name.c_str())) old = v;
    if (value) ::setenv(name.c_str(), value->c_str(), 1);
    else ::unsetenv(name.c_str());
  }
  ~ScopedEnv() {
    if (old) ::setenv(name.c_str(), old->c_str(), 1);
    else ::unsetenv(name.c_str());
  }
};

inline std::filesystem::path source_dir() { return EARS_SOURCE_DIR; }

// ../shared beside the checkout (or $EARS_SHARED_DIR). Empty path when absent.
inline std::filesystem::path shared_dir() {
  if (const char* env = std::getenv("EARS_SHARED_DIR")) return env;
  auto p = source_dir().parent_path() / "shared";
  return std::filesystem::exists(p) ? p : std::filesystem::path();
}

// The built ears-bench executable (ctest sets EARS_BENCH_EXE; else beside the test binary).
inline std::string exe() {
  if (const char* e = std::getenv("EARS_BENCH_EXE")) return e;
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "ears-bench").string();
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

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Starts `ears-bench args...` (no shell) with stdout/stderr redirected to files; returns the pid.
inline pid_t spawn_ears(const std::vector<std::string>& args, const std::filesystem::path& out,
                        const std::filesystem::path& err) {
  const std::string bin = exe();
  std::vector<std::string> all = {bin};
  all.insert(all.end(), args.begin(), args.end());
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fo = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int fe = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fo < 0 || fe < 0) ::_exit(126);
    ::dup2(fo, 1);
    ::dup2(fe, 2);
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

// Exit code, or 128 + signal. Kills the child and fails the test after `timeout_s`.
inline int wait_for(pid_t pid, double timeout_s = 180) {
  const auto t0 = std::chrono::steady_clock::now();
  int status = 0;
  while (true) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout_s) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ADD_FAILURE() << "ears-bench did not finish within " << timeout_s << " s";
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// Runs `ears-bench args...` (no shell: arguments are passed as they are) to completion.
inline CommandResult cli(const std::vector<std::string>& args, double timeout_s = 180) {
  static int calls = 0;
  const auto base = std::filesystem::temp_directory_path() /
                    ("ears_cli_" + std::to_string(::getpid()) + "_" + std::to_string(calls++));
  const std::string out = base.string() + ".out", err = base.string() + ".err";
  CommandResult r;
  r.exit_code = wait_for(spawn_ears(args, out, err), timeout_s);
  r.out = read_file(out);
  r.err = read_file(err);
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

inline std::string show(const CommandResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\n--- stdout\n" + r.out + "\n--- stderr\n" + r.err;
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

// A doc section generated from code (report fields, config keys): docs/<doc> must hold
// `generated` between the `begin` and `end` markers. With EARS_UPDATE_DOCS set, rewrites the
// block instead. Each differing line is its own failure, so the message shows what to change.
inline void expect_generated_block(const std::string& doc, const std::string& begin, const std::string& end,
                                   const std::string& generated, const std::string& update_command) {
  const auto path = source_dir() / "docs" / doc;
  std::string text = read_file(path);
  const size_t b = text.find(begin), e = text.find(end);
  ASSERT_NE(b, std::string::npos) << "docs/" << doc << " lacks " << begin;
  ASSERT_NE(e, std::string::npos) << "docs/" << doc << " lacks " << end;
  const size_t body = b + begin.size();
  if (std::getenv("EARS_UPDATE_DOCS")) {
    text.replace(body, e - body, generated);
    std::ofstream(path, std::ios::binary) << text;
    return;
  }
  const std::string in_doc = text.substr(body, e - body);
  auto lines = [](const std::string& t) {
    std::multiset<std::string> out;
    std::istringstream in(t);
    for (std::string l; std::getline(in, l);) out.insert(l);
    return out;
  };
  const auto doc_lines = lines(in_doc), code_lines = lines(generated);
  for (const auto& l : code_lines)
    if (!doc_lines.count(l)) ADD_FAILURE() << "generated from the code, not in docs/" << doc << ": " << l;
  for (const auto& l : doc_lines)
    if (!code_lines.count(l)) ADD_FAILURE() << "in docs/" << doc << ", not generated from the code: " << l;
  EXPECT_TRUE(in_doc == generated) << "docs/" << doc << "'s generated block differs from the code; rerun "
                                   << "EARS_UPDATE_DOCS=1 " << update_command << " and keep the prose in step";
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
