#include "harness/run/run_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "decoders/safetensors_header.h"
#include "harness/base/error.h"
#include "harness/base/files.h"
#include "harness/base/json.h"
#include "harness/base/rng.h"

namespace ears::runner {

namespace fs = std::filesystem;
using nlohmann::json;

RunDirLock::RunDirLock(const fs::path& dir) {
  const fs::path file = dir / ".lock";
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("{}: cannot open the run lock ({}); check the directory is writable", file.string(), std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    char pid[32] = {};
    const ssize_t n = ::pread(fd_, pid, sizeof pid - 1, 0);
    ::close(fd_);
    fd_ = -1;
    fail("{}: another ears-bench process{} is writing this run directory; wait for it to finish, or pass another --out",
         dir.string(), n > 0 ? fmt::format(" (pid {})", std::string(pid, static_cast<size_t>(n))) : "");
  }
  const std::string pid = std::to_string(::getpid());
  if (::ftruncate(fd_, 0) == 0 && ::pwrite(fd_, pid.data(), pid.size(), 0) < 0) {
    // The pid is only for the message above; the lock itself holds.
  }
}

RunDirLock::~RunDirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

std::string checkpoint_fingerprint(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return "";
  uint64_t h = fnv1a64(fs::exists(dir / "config.json") ? read_file(dir / "config.json", "config.json") : "");
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".safetensors") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    uint64_t n = 0;
    in.read(reinterpret_cast<char*>(&n), 8);  // little-endian header length
    std::string header(static_cast<size_t>(std::min<uint64_t>(n, 100u << 20)), '\0');
    in.read(header.data(), static_cast<std::streamsize>(header.size()));
    h = fnv1a64(fmt::format("{}|{}|", f.filename().string(), fs::file_size(f, ec)), h);
    h = fnv1a64(header, h);
  }
  return fmt::format("{:016x}", h);
}

std::string file_fingerprint(const std::string& path) {
  if (path.empty()) return "";
  return fmt::format("{:016x}", fnv1a64(read_file(path, "the dataset file")));
}

json run_fingerprint(const config::ExperimentSpec& spec, const std::string& dataset_path) {
  json drafts = json::object();
  for (const auto& a : spec.arms)
    if (a.draft.kind != "none" && !drafts.contains(a.draft.path))
      drafts[a.draft.path] = checkpoint_fingerprint(a.draft.path);
  return {{"target", checkpoint_fingerprint(spec.target.path)},
          {"drafts", drafts},
          {"dataset", file_fingerprint(dataset_path)}};
}

std::vector<std::string> check_resume_matches(const fs::path& dir, const json& recorded_config,
                                              const json& recorded_fingerprint, const json& config,
                                              const json& fingerprint, bool force) {
  std::vector<std::string> diffs = json_differences(recorded_config, config);
  if (recorded_fingerprint.is_object())  // runs written before fingerprints existed have none
    for (auto& d : json_differences(recorded_fingerprint, fingerprint)) diffs.push_back("fingerprint." + d);
  if (!diffs.empty() && !force)
    fail("--resume {}: the run would mix two experiments; its config.yaml, models or dataset changed since it started "
         "({}); start a new run with --out, or pass --force to continue anyway (recorded in the report)",
         dir.string(), fmt::join(diffs, "; "));
  return diffs;
}

}  // namespace ears::runner
