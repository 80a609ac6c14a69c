// Incremental decoder of our capture files (native/format/gpumem_format.h, FORMAT.md).
//
// feed() takes the bytes that follow the last consumed offset and returns how many it consumed: only
// complete records are consumed, so a record still being written by a live workload is left for the
// next poll. Damage (an impossible length, a record shorter than its struct) stops decoding for good
// with a Problem naming the offset; everything before it stays in the model.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "id_map.h"
#include "model.h"

namespace gpumem {

class CaptureError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class CaptureDecoder {
 public:
  CaptureDecoder() = default;
  CaptureDecoder(const CaptureDecoder&) = delete;
  CaptureDecoder& operator=(const CaptureDecoder&) = delete;
  ~CaptureDecoder() { stop_prefault(); }
  // Returns bytes consumed from `data` (which starts at offset()). Throws CaptureError for a foreign
  // file or a newer major version (nothing usable), never for damage after the header.
  size_t feed(Model& m, const uint8_t* data, size_t len);
  uint64_t offset() const { return offset_; }
  bool damaged() const { return damaged_; }
  // Bytes of an incomplete record at the end (after the last feed).
  size_t pending_bytes() const { return pending_; }
  // Records consumed so far, the file header counted as one: what the workload's allocator recorded (an event,
  // a marker, a notice, a state), not the periodic device samples and stats. Model.poll answers the growth of
  // this count (Note [Poll counts records]).
  size_t records_decoded() const { return records_; }

  static bool looks_like_capture(const uint8_t* data, size_t len);
  // The file's current size, so the first device's columns are allocated once instead of grown.
  void size_hint(uint64_t bytes) { size_hint_ = bytes; }

 private:
  size_t feed_header(Model& m, const uint8_t* data, size_t len);
  size_t feed_records(Model& m, const uint8_t* data, size_t len);
  // Returns false on damage (problem recorded).
  bool record(Model& m, uint8_t type, uint8_t device, uint16_t flags, const uint8_t* p, uint32_t n, uint64_t at);
  int64_t to_us(uint64_t t_ns) const;
  uint32_t str(uint32_t id) const;
  uint32_t stack(uint32_t id) const;

  uint64_t offset_ = 0;
  bool header_done_ = false;
  bool damaged_ = false;
  uint16_t minor_ = 0;  // the capture's format minor (Note [Strict about our own writer])
  size_t pending_ = 0;
  size_t records_ = 0;
  int64_t mono_anchor_ns_ = 0, wall_anchor_ns_ = 0;
  DeviceData& dev(Model& m, uint8_t device) {
    DeviceData*& d = devs_[device];  // std::map nodes never move, so the pointer stays valid
    if (!d) {
      d = &m.device(device);
      d->start_empty = true;
      // Most of a capture is block events (56 bytes with their header): size the columns once.
      if (size_hint_) {
        size_t n = std::min<uint64_t>(size_hint_ / 56 + 16, 1u << 30);
        d->reserve(n);
        d->advise_huge_columns();  // Note [Huge columns]
        // A big first read maps them ahead of the decoder (Note [Prefault helper] in capture_decoder.cpp).
        if (size_hint_ >= kPrefaultMin && !prefault_.joinable() && fresh_read_) start_prefault(*d);
      }
    }
    return *d;
  }

  // File ids → model ids (fmt::IdMap: dense, with a hash map for a damaged file's far-off ids).
  using IdMap = fmt::IdMap;
  IdMap strings_, frames_, stacks_;
  // Each thread's memory label from its last REC_USER_METADATA (BlockEvent.thread → model string id); the model id
  // of "N/A", the compile_context of a labelled event (Note [User metadata] in gpumem_format.h).
  std::unordered_map<uint32_t, uint32_t> labels_;
  uint32_t na_id_ = 0;
  DeviceData* devs_[256] = {};
  uint64_t size_hint_ = 0;

  static constexpr uint64_t kPrefaultMin = 32u << 20;
  void start_prefault(DeviceData& d);
  void stop_prefault();
  std::thread prefault_;
  std::atomic<bool> prefaulting_{false};
  std::atomic<size_t> progress_{0};  // events of prefault_dev_ decoded so far (published every 64 k records)
  DeviceData* prefault_dev_ = nullptr;
  size_t published_ = 0;
  bool fresh_read_ = false;  // this feed() started at the file's first byte
};

}  // namespace gpumem
