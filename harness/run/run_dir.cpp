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
#include <set>

#include "decoders/safetensors_header.h"
#include "harness/base/error.h"
#include "harness/base/files.h"
#include "harness/base/json.h"
#include "harness/base/rng.h"
#include "reports/report.h"

namespace ears::runner {

namespace fs = std::filesystem;
using nlohmann::json;

RunDirLock::RunDirLock(const fs::path& dir) {
  const fs::path file = dir / kLockFile;
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
  remove_stale_temp_files(dir);
}

// The lock makes this the only writer: a "<run file>.tmp.<pid>" here is a killed writer's
// (write_file_atomic's temp file before its rename) and would otherwise stay. Only the run's own
// files' names: --out may name a directory that holds the user's files too.
void RunDirLock::remove_stale_temp_files(const fs::path& dir) {
  static const std::set<std::string> ours = {kConfigFile,     kRunMetaFile, kReportJsonFile, kReportMarkdownFile,
                                             kAcceptLengthChart, kSweepChart, kGateFile};
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (ours.count(atomic_write_target(e.path().filename().string())) && e.is_regular_file(ec)) fs::remove(e.path(), ec);
}

RunDirLock::~RunDirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

namespace {

// Every tensor's first and last 4 KiB and 8 evenly spaced 4 KiB blocks between, hashed into h
// (header: the file's parsed safetensors header).
uint64_t hash_tensor_samples(std::ifstream& in, const SafetensorsHeader& header, uint64_t h) {
  constexpr uint64_t kBlock = 4096, kInner = 8;
  std::string block;
  for (const SafetensorsTensor& t : header.tensors) {
    const uint64_t n = t.nbytes();
    for (uint64_t k = 0; k < kInner + 2; ++k) {
      const uint64_t at = k == 0 ? 0 : k == kInner + 1 ? (n > kBlock ? n - kBlock : 0) : n * k / (kInner + 1);
      block.resize(static_cast<size_t>(std::min(kBlock, n - std::min(at, n))));
      in.clear();
      in.seekg(static_cast<std::streamoff>(t.begin + at));
      in.read(block.data(), static_cast<std::streamsize>(block.size()));
      h = fnv1a64(block, h);
    }
  }
  return h;
}

// One safetensors file: its name, size, header and the tensors' sampled bytes. A header the loader
// would refuse is hashed as bytes (the load names the problem).
uint64_t hash_safetensors_file(const fs::path& f, uint64_t h) {
  std::error_code ec;
  const uint64_t size = fs::file_size(f, ec);
  const std::string header = read_safetensors_header_bytes(f, uint64_t{100} << 20);
  h = fnv1a64(fmt::format("{}|{}|", f.filename().string(), size), h);
  h = fnv1a64(header, h);
  std::string bytes(8, '\0');  // the u64 length, then the header, as parse_safetensors_header reads them
  for (size_t i = 0; i < 8; ++i) bytes[i] = static_cast<char>((uint64_t{header.size()} >> (8 * i)) & 0xff);
  bytes += header;
  try {
    std::ifstream in(f, std::ios::binary);
    h = hash_tensor_samples(in, parse_safetensors_header(reinterpret_cast<const uint8_t*>(bytes.data()), size, f.string()), h);
  } catch (const Error&) {
  }
  return h;
}

}  // namespace

std::string checkpoint_fingerprint(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return "";
  uint64_t h = fnv1a64(fs::exists(dir / "config.json") ? read_file(dir / "config.json", "config.json") : "");
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "generation_config.json"})
    if (fs::is_regular_file(dir / name)) h = fnv1a64(fmt::format("{}|{}", name, read_file(dir / name, name)), h);
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".safetensors") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) h = hash_safetensors_file(f, h);
  return fmt::format("{:016x}", h);
}

std::string file_fingerprint(const std::string& path) {
  if (path.empty()) return "";
  return fmt::format("{:016x}", fnv1a64(read_file(path, "the dataset file")));
}

std::string requests_fingerprint(const std::vector<Request>& requests) {
  uint64_t h = fnv1a64("");
  for (const Request& r : requests) {
    h = fnv1a64(fmt::format("{}|{}|{}|", r.id.size(), r.prompt.size(), r.gold.size()), h);
    h = fnv1a64(r.id, h);
    h = fnv1a64(r.prompt, h);
    for (const std::string& g : r.gold) h = fnv1a64(fmt::format("{}|{}", g.size(), g), h);
  }
  return fmt::format("{:016x}", h);
}

json run_fingerprint(const config::ExperimentSpec& spec, const Dataset& dataset) {
  json drafts = json::object();
  for (const auto& a : spec.arms)
    if (a.draft.kind != "none" && !drafts.contains(a.draft.path))
      drafts[a.draft.path] = checkpoint_fingerprint(a.draft.path);
  return {{"target", checkpoint_fingerprint(spec.target.path)},
          {"drafts", drafts},
          {"dataset", file_fingerprint(dataset.resolved_path)},
          {"prompts", requests_fingerprint(dataset.requests)}};
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
