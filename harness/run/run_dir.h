// Run-directory integrity: one writer at a time (an advisory lock), and the fingerprint that
// says whether two runs are the same experiment (checked on --resume; merge checks the same
// fields through reports/report.cpp).
#pragma once
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "datasets/dataset.h"
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
  static void remove_stale_temp_files(const std::filesystem::path& dir);
  int fd_ = -1;
};

// fnv1a64 (hex) over config.json, the tokenizer files (tokenizer.json, tokenizer_config.json,
// generation_config.json) and, per *.safetensors file, its name, size, header (the tensor table)
// and a sample of every tensor's bytes: its first and last 4 KiB and 8 evenly spaced 4 KiB blocks.
// Retrained or edited weights saved under the same names change it (the header alone did not); it
// reads ~40 KiB a tensor, not a 60 GB checkpoint — an edit confined to unsampled bytes goes unseen.
std::string checkpoint_fingerprint(const std::filesystem::path& dir);
// fnv1a64 (hex) of a file's bytes ("" for an empty path: a generated dataset).
std::string file_fingerprint(const std::string& path);
// fnv1a64 (hex) of the requests' ids, prompts (few-shot exemplars and template included) and gold
// answers: what the arms were asked, whichever files and generator produced it.
std::string requests_fingerprint(const std::vector<Request>& requests);

// environment.fingerprint of run_meta.json:
//   {"target": fp, "drafts": {path: fp}, "dataset": fp of the file, "prompts": fp of the requests}
// over every request the dataset yields (not one shard's), so the shards of a run agree.
nlohmann::json run_fingerprint(const config::ExperimentSpec& spec, const Dataset& dataset);

// --resume: the run's config.yaml (and its models and dataset) must be what the run started
// with. Differences -> ears::Error naming them, unless `force`; then they are returned (the
// runner records them in environment.forced, which the report shows as a warning).
std::vector<std::string> check_resume_matches(const std::filesystem::path& dir, const nlohmann::json& recorded_config,
                                              const nlohmann::json& recorded_fingerprint,
                                              const nlohmann::json& config, const nlohmann::json& fingerprint,
                                              bool force);

}  // namespace ears::runner
