#include "decoders/cpu_avx2.h"
