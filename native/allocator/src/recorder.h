// recorder.h — the recording side of the lens allocator: Python stack capture, the capture-file writer,
// snapshots and the control server. The caching allocator (allocator_api.h, namespace gpumem::core)
// calls these; nothing here calls back into the allocator while holding a recorder lock.
//
// Note [Lock order]: GIL → allocator (device) lock → recorder buffer lock → writer lock.
// capture_stack() may take the GIL, so it must run BEFORE the allocator lock is taken; emit() and
// emit2() are called WITH the device lock held (that is what makes a device's records appear in the
// file in exactly the order the allocator performed them) and never take the GIL or block on I/O.
#pragma once
#include <cstdint>
#include <string>

namespace gpumem::rec {

uint64_t now_ns();         // CLOCK_MONOTONIC
bool recording();          // a capture file is open
uint32_t capture_stack();  // BEFORE any allocator lock; may take the GIL; 0 = none
uint32_t thread_number();  // small per-thread number (0 = main)
// Appends one record (RecordHeader + payload) to the capture. Safe to call under the device lock.
void emit(uint8_t type, uint8_t device, uint16_t flags, const void* payload, uint32_t bytes);
// The same with a payload in two pieces (a fixed struct and its variable tail).
void emit2(uint8_t type, uint8_t device, uint16_t flags, const void* a, uint32_t an, const void* b, uint32_t bn);
bool configure(const char* json, std::string* err);  // recording keys of gpumem_configure's JSON

// ---- Additions beyond the first interface (the core calls them where noted) -------------------
// gpumem_init calls this with PyTorch's device count (it may be called with 0 first): announces each
// device with a REC_DEVICE record (name, total bytes) and starts the samplers for it.
void on_init(int device_count);
// Writes a REC_STATE of `device` (-1 = all) with the given reason (0 request, 1 OOM, 2 exit) and returns
// the capture offset of the first state record, or -1 when not recording. The OOM path calls it right
// after emitting REC_OOM; it calls core::snapshot_segments, so call it WITHOUT the device lock.
int64_t write_state(int device, uint32_t reason);


// ---- Shared with the control server and the C API (recorder.cc) -------------------------------
// The capture offset of the first REC_STATE (0 when no capture is open), after writing `pickle_path`
// (if not null); -1 and *err on failure.
int64_t take_snapshot(const char* pickle_path, std::string* err);
void mark(const std::string& name, uint32_t kind);  // fmt::MarkerKind
int process_rank();                                 // RANK from the environment (0 if unset)
std::string default_snapshot_path();                // <capture folder>/snapshot-<pid>-<n>.pickle

// The C API's error message (gpumem_last_error): per thread. The core may use these for its own
// errors too, so that gpumem_last_error reports whichever call failed last on this thread.
void set_last_error(const std::string& msg);
const char* last_error();

}  // namespace gpumem::rec
