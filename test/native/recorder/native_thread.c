/* native_thread.c — test helper: runs an allocator call on a thread that has no Python frames (like
 * PyTorch's autograd workers), which a Python test cannot create by itself. */
#include <pthread.h>
#include <stddef.h>

typedef void* (*malloc_fn)(size_t, int, void*);
struct job {
  malloc_fn fn;
  size_t size;
  void* result;
};

static void* run(void* arg) {
  struct job* j = (struct job*)arg;
  j->result = j->fn(j->size, 0, NULL);
  return NULL;
}

void* alloc_on_native_thread(malloc_fn fn, size_t size) {
  struct job j = {fn, size, NULL};
  pthread_t t;
  if (pthread_create(&t, NULL, run, &j) != 0) return NULL;
  pthread_join(t, NULL);
  return j.result;
}

/* Per-pair cost of malloc+free in ns, called from Python through ctypes (which releases the GIL, as
 * PyTorch does around allocations), so the stack capture walks the caller's real Python frames. */
#include <time.h>
typedef void (*free_fn)(void*, size_t, int, void*);
double alloc_free_loop(malloc_fn m, free_fn f, size_t n, size_t size) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (size_t i = 0; i < n; i++) f(m(size, 0, NULL), size, 0, NULL);
  clock_gettime(CLOCK_MONOTONIC, &b);
  return ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / (double)n;
}

/* An autograd node's run on a frameless thread (Note [Backward on the forward line]): node_begin, an allocation of
 * `size`, node_end, then an allocation of `after` (0: none) before any next node, as the engine's validate_outputs
 * and input buffers do (Note [Node's evaluation]). The two pointers come back in out[0], out[1]. */
typedef void (*node_begin_fn)(unsigned long long, long long, const char*);
typedef void (*node_end_fn)(void);
struct node_job {
  malloc_fn fn;
  node_begin_fn begin;
  node_end_fn end;
  unsigned long long forward_thread;
  long long seq;
  const char* name;
  size_t size, after;
  void** out;
};

static void* run_node(void* arg) {
  struct node_job* j = (struct node_job*)arg;
  j->begin(j->forward_thread, j->seq, j->name);
  j->out[0] = j->fn(j->size, 0, NULL);
  j->end();
  j->out[1] = j->after ? j->fn(j->after, 0, NULL) : NULL;
  return NULL;
}

int node_on_native_thread(malloc_fn fn, node_begin_fn begin, node_end_fn end, unsigned long long forward_thread,
                          long long seq, const char* name, size_t size, size_t after, void** out) {
  struct node_job j = {fn, begin, end, forward_thread, seq, name, size, after, out};
  pthread_t t;
  if (pthread_create(&t, NULL, run_node, &j) != 0) return -1;
  pthread_join(t, NULL);
  return 0;
}
