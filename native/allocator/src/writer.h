// writer.h — the capture file's byte stream: a bounded in-memory buffer that emitters append whole
// records to under one short mutex, and a writer thread that moves batches to the file.
//
// Note [Writer ordering]: every record goes through one buffer under one mutex, and emit() is called
// under the allocator's device lock, so a device's records reach the file in exactly the order the
// allocator performed them; interned records are appended before the record that first uses them.
// Note [Writer bound]: bytes not yet written are capped (configure "buffer_limit_bytes", default
// 64 MiB). Past it, droppable records (block/segment events, samples, stats) are counted, not queued,
// and a REC_LOST with the count precedes the next record that is queued. Records that later records
// refer to or that a user asked for (interned tables, device, state, marker, notice, empty cache, OOM,
// end) are "pinned": always queued, so ids never dangle and requested results never vanish.
// Note [Writer failure] (writer.cc): a failed write ends the capture at a whole record with REC_END
// reason 1 and one stderr line; the workload goes on.
#pragma once
#include <cstdint>
#include <string>

namespace gpumem::rec::writer {

struct Options {
  uint64_t buffer_limit_bytes = 64ull << 20;
  uint32_t flush_interval_ms = 50;
  // 0: unbounded. Otherwise the file never grows past it (FORMAT.md §5, Note [Capture budget] in compactor.cc).
  uint64_t budget_bytes = 0;
};

// Creates (truncates) `path`, writes FileHeader + header JSON and starts the writer thread.
bool open(const std::string& path, const std::string& header_json, const Options& opt, std::string* err);
bool is_open();
const std::string& path();

// Appends one record. Returns the capture offset of the record, or -1 if it was dropped / not open.
int64_t append(uint8_t type, uint8_t device, uint16_t flags, const void* a, uint32_t an, const void* b = nullptr,
               uint32_t bn = 0, bool pinned = false);
bool pinned_type(uint8_t type);

// Note [Probe switches] (c_api.cc): how often the thread writes when nothing asks it to (the option's
// flush_interval_ms otherwise); 1–10000 ms.
void set_flush_interval_ms(uint32_t ms);
// Hands everything queued so far to the file and waits until it is written.
void flush();
// Appends REC_END, flushes, stops the thread and closes the file. Idempotent.
// `end_t_ns`: the REC_END's time (0: now; a tool re-writing a capture keeps the original's).
void close(int exit_code, uint64_t end_t_ns = 0);
// Called in a fork child: the writer's thread does not exist there and the file is the parent's.
void forget_after_fork();

uint64_t lost_total();
// Compacted ranges written so far (budgeted captures).
uint64_t compactions();
// Merges of the compacted ranges into one thinned range so far (Note [Budget as a cap]).
uint64_t merges();

}  // namespace gpumem::rec::writer
