// Run-directory integrity: one writer at a time (an advisory lock), and the fingerprint that
// says whether two runs are the same experiment (checked on --resume; merge checks the same
// fields through reports/report.cpp).
#pragma once
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "harness/config/config.h"

namespace ears::runner {

// flock(LOCK_EX | LOCK_NB) on <dir>/.lock, held until destruction (the kernel drops it when the
// process dies, so a killed run never blocks the next). A second writer fails at once:
// ears::Error naming the directory and the holder's pid.
class RunDirLock {
 public:
  explicit RunDirLock(const std::filesystem::path& dir);
  ~RunDirLock();
  RunDirLock(const RunDirLock&) = delete;
  RunDirLock& operator=(const RunDirLock&) = delete;

 private:
  int fd_ = -1;
};

// fnv1a64 (hex) over config.json and, per *.safetensors file, its name, size and header (the
// tensor table) — never the weights, so it costs milliseconds on a 60 GB checkpoint.
std::string checkpoint_fingerprint(const std::filesystem::path& dir);
// fnv1a64 (hex) of a file's bytes ("" for an empty path: a generated dataset).
std::string file_fingerprint(const std::string& path);

// environment.fingerprint of run_meta.json: {"target": fp, "drafts": {path: fp}, "dataset": fp}.
nlohmann::json run_fingerprint(const config::ExperimentSpec& spec, const std::string& dataset_path);

// --resume: the run's config.yaml (and its models and dataset) must be what the run started
// with. Differences -> ears::Error naming them, unless `force`; then they are returned (the
// runner records them in environment.forced, which the report shows as a warning).
std::vector<std::string> check_resume_matches(const std::filesystem::path& dir, const nlohmann::json& recorded_config,
                                              const nlohmann::json& recorded_fingerprint,
                                              const nlohmann::json& config, const nlohmann::json& fingerprint,
                                              bool force);

}  // namespace ears::runner
