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

/* The autograd node this thread evaluates, as the observer extension reads torch::autograd::get_current_node() for
 * the library (Note [Backward on the forward line]): a thread-local the engine sets around a node's whole evaluation
 * (apply(), then validate_outputs and the input buffers). */
static __thread int t_has_node;
static __thread unsigned long long t_node_seq, t_node_thread;
static __thread const char* t_node_name;

int current_node(unsigned long long* seq, unsigned long long* thread, const char** name) {
  if (!t_has_node) return 0;
  *seq = t_node_seq;
  *thread = t_node_thread;
  *name = t_node_name;
  return 1;
}

/* The calling thread's node (has 0: none), for a test that evaluates a node on a Python thread. */
void set_current_node(int has, unsigned long long forward_thread, unsigned long long seq, const char* name) {
  t_has_node = has;
  t_node_thread = forward_thread;
  t_node_seq = seq;
  t_node_name = name;
}

/* An autograd node's evaluation on a frameless thread: an allocation of `size` (its apply()), then one of `after`
 * (0: none: validate_outputs, an input buffer's sum). The two pointers come back in out[0], out[1]. */
struct node_job {
  malloc_fn fn;
  unsigned long long forward_thread, seq;
  const char* name;
  size_t size, after;
  void** out;
};

static void* run_node(void* arg) {
  struct node_job* j = (struct node_job*)arg;
  set_current_node(1, j->forward_thread, j->seq, j->name);
  j->out[0] = j->fn(j->size, 0, NULL);
  j->out[1] = j->after ? j->fn(j->after, 0, NULL) : NULL;
  set_current_node(0, 0, 0, NULL);
  return NULL;
}

int node_on_native_thread(malloc_fn fn, unsigned long long forward_thread, unsigned long long seq, const char* name,
                          size_t size, size_t after, void** out) {
  struct node_job j = {fn, forward_thread, seq, name, size, after, out};
  pthread_t t;
  if (pthread_create(&t, NULL, run_node, &j) != 0) return -1;
  pthread_join(t, NULL);
  return 0;
}
