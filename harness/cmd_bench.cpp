#include <CLI/CLI.hpp>
#include "harness/commands.h"
namespace ears {
void add_bench_commands(CLI::App&, CommonOptions&, int&) {}
}
