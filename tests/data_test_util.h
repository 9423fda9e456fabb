// Helpers shared by the datasets/ tests (data_shared_files_test.cpp, data_loaders_test.cpp):
// a scratch directory, a scoped environment variable, the error text of a failing load.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "datasets/dataset.h"
#include "harness/base/error.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;

namespace ears::test::data_test {

// A scratch directory removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("ears_data_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string write(const std::string& name, const std::string& content) const {
    fs::path p = path / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << content;
    return p.string();
  }
};

using ears::test::ScopedEnv;

inline std::string error_of(const DatasetSpec& spec) {
  try {
    load_dataset(spec);
  } catch (const ears::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace ears::test::data_test
