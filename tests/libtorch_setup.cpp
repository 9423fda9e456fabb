// Linked into every test binary that runs LibTorch ops (CMakeLists.txt, ears_test ... TORCH):
// before any test, LibTorch's CPU backend is set up as the CLI's main() sets it.
#include "decoders/runtime.h"

namespace {

const bool kLibtorchSetUp = [] {
  ears::apply_onednn_cap();
  return true;
}();

}  // namespace
