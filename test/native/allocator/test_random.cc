// test_random.cc — randomized runs: invariants after every operation (single thread), and the
// multi-threaded stress under ASan/UBSan (the TSan build runs it too, from stress_main.cc).
#include "stress.h"

TEST(random_fixed_segments_keep_every_invariant) { t::run_single_thread(false, 20000, 7); }
TEST(random_expandable_segments_keep_every_invariant) { t::run_single_thread(true, 20000, 11); }
TEST(random_expandable_trim_on_growth_keeps_every_invariant) { t::run_single_thread(true, 20000, 13, true); }
// 1 M operations in all: 600 k on fixed segments, 400 k on expandable ones.
TEST(threaded_stress_fixed_600k_ops) { t::run_threads(false, 4, 150000); }
TEST(threaded_stress_expandable_400k_ops) { t::run_threads(true, 4, 100000, true); }
