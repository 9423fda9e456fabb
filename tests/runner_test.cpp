#include "tests/test_util.h"
TEST(Runner, Placeholder) { SUCCEED(); }
