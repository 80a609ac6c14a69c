/* A stand-in for the tracker extension's C reader (Note [Figures on the sampler's thread] in
   native/allocator/src/observer.h): gpumem_tracker_figures gives six figures per device, set by the test workload
   through fake_figures_set, and counts the reads and the threads they came from. */
#include <pthread.h>
#include <stdint.h>

static int64_t g_figures[6];
static volatile long g_reads;
static volatile long g_reads_off_main;
static pthread_t g_main;

void fake_figures_set(int64_t allocated, int64_t reserved, int64_t peak_allocated, int64_t peak_reserved,
                      int64_t ooms, int64_t requested) {
  g_main = pthread_self();
  g_figures[0] = allocated, g_figures[1] = reserved, g_figures[2] = peak_allocated;
  g_figures[3] = peak_reserved, g_figures[4] = ooms, g_figures[5] = requested;
}

long fake_figures_reads(void) { return g_reads; }
long fake_figures_reads_off_main(void) { return g_reads_off_main; }

int gpumem_tracker_figures(int device, int64_t* out) {
  if (device != 0) return -1; /* one device, as the stand-in torch has */
  g_reads++;
  if (!pthread_equal(pthread_self(), g_main)) g_reads_off_main++;
  for (int i = 0; i < 6; i++) out[i] = g_figures[i] + (i < 4 ? device : 0);
  return 0;
}
