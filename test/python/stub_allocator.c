/* A stand-in for libgpumem_allocator.so with the same C API, for testing the Python bootstrap
 * without the real allocator: host memory, exact counters, and a text log (one line per call)
 * written to the configured capture_path so tests can assert what the bootstrap called, in order. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static FILE* log_file;
static int backward_depth;
static uint64_t allocated, peak, total_alloc, total_freed, reserved, reserved_peak, n_alloc;
static const uint64_t kSeg = 2u << 20;

static void logf_(const char* fmt, const char* s, long long n) {
  if (!log_file) return;
  fprintf(log_file, fmt, s, n);
  fflush(log_file);
}

int gpumem_configure(const char* json) {
  const char* key = strstr(json, "\"capture_path\": \"");
  if (!key) return -1;
  key += strlen("\"capture_path\": \"");
  const char* end = strchr(key, '"');
  char path[4096];
  snprintf(path, sizeof path, "%.*s", (int)(end - key), key);
  pthread_mutex_lock(&mu);
  log_file = fopen(path, "w");
  pthread_mutex_unlock(&mu);
  if (!log_file) return -1;
  fprintf(log_file, "configure %s\n", json);
  fflush(log_file);
  return 0;
}
const char* gpumem_last_error(void) { return "stub: no capture_path"; }
const char* gpumem_version(void) { return "stub"; }

void* gpumem_malloc(size_t size, int device, void* stream) {
  void* p = malloc(size ? size : 1);
  pthread_mutex_lock(&mu);
  allocated += size; total_alloc += size; n_alloc++;
  if (allocated > peak) peak = allocated;
  while (reserved < allocated) reserved += kSeg;
  if (reserved > reserved_peak) reserved_peak = reserved;
  if (log_file) { fprintf(log_file, "malloc %zu backward=%d\n", size, backward_depth); fflush(log_file); }
  pthread_mutex_unlock(&mu);
  return p;
}
void gpumem_free(void* ptr, size_t size, int device, void* stream) {
  free(ptr);
  pthread_mutex_lock(&mu);
  allocated -= size; total_freed += size;
  logf_("free %s%lld\n", "", (long long)size);
  pthread_mutex_unlock(&mu);
}
void gpumem_init(int n) { logf_("init %s%lld\n", "", n); }
void gpumem_reset(void) { logf_("reset%s%.0lld\n", "", 0); }
void gpumem_memory_fraction(double f, int device) { logf_("fraction %s%lld\n", "", (long long)(f * 1000)); }
void gpumem_record_stream(void* p, void* s) {}
void* gpumem_base_alloc(void* p, size_t* size) { return p; }

size_t gpumem_stats_json(int device, char* buf, size_t cap) {
  pthread_mutex_lock(&mu);
  int n = snprintf(buf, cap,
      "{\"allocated_bytes.all.current\": %llu, \"allocated_bytes.all.peak\": %llu, "
      "\"allocated_bytes.all.allocated\": %llu, \"allocated_bytes.all.freed\": %llu, "
      "\"allocation.all.allocated\": %llu, \"reserved_bytes.all.current\": %llu, "
      "\"reserved_bytes.all.peak\": %llu, \"num_ooms\": 0, \"device_index_seen\": %d, "
      "\"not_a_2_11_key\": 7}",
      (unsigned long long)allocated, (unsigned long long)peak, (unsigned long long)total_alloc,
      (unsigned long long)total_freed, (unsigned long long)n_alloc, (unsigned long long)reserved,
      (unsigned long long)reserved_peak, device);
  pthread_mutex_unlock(&mu);
  return (size_t)n;
}
uint64_t gpumem_allocated(int device) { return allocated; }
uint64_t gpumem_reserved(int device) { return reserved; }
uint64_t gpumem_requested(int device) { return allocated; }  /* the stub does not round */
void gpumem_reset_peak_stats(int device) { peak = allocated; reserved_peak = reserved; logf_("reset_peak %s%lld\n", "", device); }
void gpumem_reset_accumulated_stats(int device) { total_alloc = total_freed = 0; logf_("reset_accumulated %s%lld\n", "", device); }

int gpumem_empty_cache(int device, uint64_t* before, uint64_t* after, int origin) {
  *before = reserved;
  reserved = (allocated + kSeg - 1) / kSeg * kSeg;
  *after = reserved;
  logf_("empty_cache origin=%s%lld\n", "", origin);
  return 0;
}

/* pickle protocol 2 of {"segments": [], "device_traces": [[]], "allocated": <allocated>} */
static size_t make_pickle(uint8_t* out) {
  size_t n = 0;
  const char* keys[] = {"segments", "device_traces", "allocated"};
  out[n++] = 0x80; out[n++] = 2; out[n++] = '}'; out[n++] = '(';
  for (int k = 0; k < 3; k++) {
    uint32_t len = (uint32_t)strlen(keys[k]);
    out[n++] = 'X'; memcpy(out + n, &len, 4); n += 4; memcpy(out + n, keys[k], len); n += len;
    if (k == 0) out[n++] = ']';
    if (k == 1) { out[n++] = ']'; out[n++] = ']'; out[n++] = 'a'; }
    if (k == 2) { int32_t v = (int32_t)allocated; out[n++] = 'J'; memcpy(out + n, &v, 4); n += 4; }
  }
  out[n++] = 'u'; out[n++] = '.';
  return n;
}
int gpumem_snapshot_pickle(uint8_t** out, size_t* len) {
  *out = malloc(128);
  *len = make_pickle(*out);
  return 0;
}
void gpumem_free_buffer(void* p) { free(p); }
int64_t gpumem_snapshot(const char* path) {
  if (path) {
    uint8_t buf[128];
    size_t n = make_pickle(buf);
    FILE* f = fopen(path, "wb");
    if (!f) return -1;
    fwrite(buf, 1, n, f);
    fclose(f);
  }
  return 4242;
}
int gpumem_mark(const char* name, uint32_t kind) {
  if (!log_file) return -1;
  pthread_mutex_lock(&mu);
  fprintf(log_file, "mark %u %s\n", kind, name); fflush(log_file);
  pthread_mutex_unlock(&mu);
  return 0;
}
int gpumem_tag(uint64_t addr, uint64_t size, uint32_t category, const char* name, int device) {
  if (!log_file) return -1;
  pthread_mutex_lock(&mu);
  fprintf(log_file, "tag %u %llu %llu %d %s\n", category, (unsigned long long)addr, (unsigned long long)size, device, name ? name : "-");
  fflush(log_file);
  pthread_mutex_unlock(&mu);
  return 0;
}
int gpumem_tags(const uint64_t* items, uint32_t count) {
  for (uint32_t i = 0; i < count; i++)
    if (gpumem_tag(items[4 * i], items[4 * i + 1], (uint32_t)items[4 * i + 2], 0, (int)items[4 * i + 3]) != 0) return -1;
  return 0;
}
int gpumem_user_metadata(const char* text) {
  if (!log_file) return -1;
  pthread_mutex_lock(&mu);
  fprintf(log_file, "user_metadata %s\n", text);
  fflush(log_file);
  pthread_mutex_unlock(&mu);
  return 1;
}
int gpumem_notice(const char* text, uint32_t level) {
  if (!log_file) return -1;
  fprintf(log_file, "notice %u %s\n", level, text); fflush(log_file);
  return 0;
}
void gpumem_backward_begin(void) { pthread_mutex_lock(&mu); backward_depth++; pthread_mutex_unlock(&mu); logf_("backward_begin%s%.0lld\n", "", 0); }
void gpumem_backward_end(void) { pthread_mutex_lock(&mu); backward_depth--; pthread_mutex_unlock(&mu); logf_("backward_end%s%.0lld\n", "", 0); }
void gpumem_shutdown(int code) { logf_("shutdown %s%lld\n", "", code); }
