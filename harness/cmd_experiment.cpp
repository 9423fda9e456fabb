#include <CLI/CLI.hpp>
#include "harness/commands.h"
namespace ears {
void add_experiment_commands(CLI::App&, CommonOptions&, int&) {}
}
