// open-stems: built-in, original story and word-problem openings for throughput runs (the
// model continues the text; there is no gold answer). Embedded in the binary, no data file.
#pragma once
#include <string>
#include <vector>

namespace ears {

// All stems, in a fixed order (>= 120, distinct, each a single line without a final newline).
const std::vector<std::string>& open_stems();

}  // namespace ears
