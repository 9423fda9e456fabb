// Helpers shared by the decoders/ model tests (model_fixtures_test.cpp, model_layers_test.cpp).
#pragma once
#include <filesystem>
#include <string>

#include "decoders/model.h"
#include "harness/base/error.h"

namespace ears::test::model_test {

inline std::string load_error(const std::filesystem::path& dir) {
  try {
    CausalLM::load(dir);
  } catch (const ears::Error& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace ears::test::model_test
