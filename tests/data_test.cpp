#include "tests/test_util.h"
TEST(Placeholder, Empty) { SUCCEED(); }
