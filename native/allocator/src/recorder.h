// recorder.h — the recording side of the lens allocator: the capture's header and configuration, the
// core's event sink that feeds the capture file and the snapshot ring, state records, markers, and
// the recording's start and end. It reads the allocator only through allocator_api.h; the allocator
// knows it only as an EventSink (event_sink.h). Locks: Note [Lock hierarchy] in README.md.
#pragma once
#include <cstdint>
#include <string>

#include "allocator_api.h"
#include "clock.h"
#include "control_server.h"
#include "event_sink.h"

namespace gpumem::rec {

inline uint64_t now_ns() { return clock::now_ns(); }                // CLOCK_MONOTONIC
inline uint32_t thread_number() { return clock::thread_number(); }  // 0 = main
bool recording();          // events are wanted (a capture file is open or the snapshot ring is on)
uint32_t capture_stack();  // BEFORE any allocator lock; may take the GIL; 0 = none

// The recorder as the allocator core's event sink: emit() appends to the capture and the snapshot
// ring; after_oom() writes the device's state (reason 1).
core::EventSink& sink();

// Appends one record (RecordHeader + payload) to the capture. Safe to call under the device lock.
void emit(uint8_t type, uint8_t device, uint16_t flags, const void* payload, uint32_t bytes);
// The same with a payload in two pieces (a fixed struct and its variable tail).
void emit2(uint8_t type, uint8_t device, uint16_t flags, const void* a, uint32_t an, const void* b, uint32_t bn);

// The recording keys of gpumem_configure's JSON: opens the capture, starts the sampler, and serves
// the control socket with `commands` (control_commands.h's handle_line in the library).
bool configure(const char* json, const control::Handler& commands, std::string* err);

// gpumem_init calls this with PyTorch's device count (it may be called with 0 first): announces each
// device with a REC_DEVICE record (name from the backend, total bytes) for the samplers.
void on_init(int device_count);
// Note [Recorder sources]: by default the recorder's figures (REC_STATS) and states (REC_STATE) come from
// the allocator core. The PyTorch-allocator mode (observer.h) replaces both, so that the recorder never
// depends on the observer (the observer sits above it, like the control commands).
struct Sources {
  core::Figures (*figures)(int device) = nullptr;  // required when set
  // Optional: the sampler's pass calls it for each device before reading its figures, on the sampler's thread
  // (Note [Figures on the sampler's thread] in observer.h).
  void (*refresh)(int device) = nullptr;
  // Writes the states (and the pickle, when pickle_path is not empty); first offset or -1. May be null.
  int64_t (*state)(int device, uint32_t reason, const char* pickle_path) = nullptr;
};
void set_sources(const Sources& s);
// Observer mode (observer.h): the host announces each device PyTorch uses (REC_DEVICE, sampling).
void announce_device(int device, const std::string& name, uint64_t total_bytes, const std::string& pci_bus_id);
// Writes a REC_STATE of `device` (-1 = all) with the given reason (0 request, 1 OOM, 2 exit, 3 resync)
// and returns the capture offset of the first state record, or -1 when not recording. It reads the
// allocator's segments, so call it WITHOUT the device lock.
int64_t write_state(int device, uint32_t reason);

// The capture offset of the first REC_STATE (0 when no capture is open), after writing `pickle_path`
// (if not null); -1 and *err on failure.
int64_t take_snapshot(const char* pickle_path, std::string* err);
void mark(const std::string& name, uint32_t kind);  // fmt::MarkerKind
void notice(const std::string& text, uint32_t level);
void tag(uint64_t addr, uint64_t size, uint32_t category, const char* name, int device);  // fmt::TagRec
// The calling thread's memory label from now on (Note [User metadata] in gpumem_format.h): a REC_USER_METADATA when
// it differs from the one last written for this thread, and the snapshot ring's user_metadata. "" clears it. Takes
// no allocator lock and never the GIL (the observer calls it under PyTorch's allocator lock). True if written.
bool user_metadata(const std::string& text);
int process_rank();                   // RANK from the environment (0 if unset)
std::string default_snapshot_path();  // <capture folder>/snapshot-<pid>-<n>.pickle

// Note [Last figures] (recorder.cc's shutdown): PyTorch's stats carry the figures (the observer sets them), so a clean
// close writes one more sampler pass with the figures the host read last.
void sample_at_close();
// Ends the recording: stops the sampler and the control socket, writes the exit state (not from
// atexit, when the allocator may be gone) and REC_END, closes the file. Idempotent; nothing in a fork
// child.
void shutdown(int exit_code);

}  // namespace gpumem::rec
