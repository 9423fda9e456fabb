// report.md: a reviewer can paste it. It opens with what ran (a configuration block: models,
// dtype, decoding, threads, kernel path, CPU/GPU), warns when the sample is small or the models
// are toys, then the paper's table, details (verifier in words), acceptance, uncertainty,
// categories, β sweep, and the charts that have data. Torch-free.
#pragma once
#include <nlohmann/json_fwd.hpp>

#include <initializer_list>
#include <string>

namespace ears {

struct Report;

// Below this many paired requests a comparison's intervals are too wide to conclude anything:
// report.md says so beside the table.
inline constexpr long kSmallSamplePairs = 30;
// A target with fewer parameters than this, run on a real benchmark, is a toy (the bundled pair
// has ~5M): report.md carries a banner saying the numbers show the harness works, not quality.
inline constexpr double kToyModelParameters = 50e6;
// Datasets made for the toy models; the banner is not shown on them.
bool is_toy_dataset(const std::string& name);

std::string render_markdown(const Report& report);

// An arm's verifier (report.json arms[].verifier) in words: "ears β=0.1 (max_prob)",
// "baseline (exact)", "typical ε=0.09 δ=0.3", "greedy", then ", eagle3 draft" or ", target only".
std::string verifier_in_words(const nlohmann::json& verifier);

// obj[a][b]... as text (a string as is, anything else as JSON); "" when a key is missing or null
// (older reports, hand-made inputs).
std::string text_at(const nlohmann::json& obj, std::initializer_list<const char*> path);

// The run's draft (report.json environment.draft, the `environment` object given) in words:
// "draft eagle3 in bfloat16 on kernel path amx (0.6M parameters)"; "" when no arm drafted.
std::string draft_in_words(const nlohmann::json& environment);

// Which charts have data (write_report_files writes only those; report.md links only those).
bool has_accept_length_chart(const Report& report);  // some arm drafted
bool has_sweep_chart(const Report& report);          // a β sweep with a defined accuracy change

}  // namespace ears
