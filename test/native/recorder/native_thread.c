/* native_thread.c — test helper: runs an allocator call on a thread that has no Python frames (like
 * PyTorch's autograd workers), which a Python test cannot create by itself. */
#include <pthread.h>
#include <stddef.h>

typedef void* (*malloc_fn)(size_t, int, void*);
struct job { malloc_fn fn; size_t size; void* result; };

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
