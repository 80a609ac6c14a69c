#include "model.h"

#include <sys/mman.h>
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "gpumem_format.h"
#include "torch_snapshot.h"
#include "user_frames.h"

namespace gpumem {

// PyTorch's words (torch_snapshot.h, Note [One snapshot schema]), plus our own 'empty_cache'.
namespace ts = fmt::torch;
const char* const kActionNames[ACT_COUNT] = {ts::action_name(ts::Action::alloc),
                                             ts::action_name(ts::Action::free_requested),
                                             ts::action_name(ts::Action::free_completed),
                                             ts::action_name(ts::Action::segment_alloc),
                                             ts::action_name(ts::Action::segment_free),
                                             ts::action_name(ts::Action::segment_map),
                                             ts::action_name(ts::Action::segment_unmap),
                                             ts::action_name(ts::Action::snapshot),
                                             ts::action_name(ts::Action::oom),
                                             "empty_cache"};
const char* const kBlockStateNames[3] = {ts::kBlockStateNames[0], ts::kBlockStateNames[1], ts::kBlockStateNames[2]};

uint32_t Model::intern(std::string_view s) {
  auto it = string_ids.find(std::string(s));
  if (it != string_ids.end()) return it->second;
  uint32_t id = (uint32_t)strings.size();
  strings.emplace_back(s);
  string_ids.emplace(strings.back(), id);
  return id;
}

uint32_t Model::intern_frame(uint32_t file, uint32_t name, uint32_t line) {
  auto [it, fresh] = frame_ids.try_emplace({(uint64_t)file << 32 | name, line}, (uint32_t)frames.size());
  if (fresh) frames.push_back(FrameData{file, name, line});
  return it->second;
}

uint32_t Model::intern_stack(const std::vector<uint32_t>& frame_ids, uint32_t flags) {
  const bool backward = flags & (fmt::kStackBackward | fmt::kStackLinked);
  if (frame_ids.empty() && !backward) return 0;
  std::vector<uint32_t> key = frame_ids;
  key.push_back(flags);  // the flags are part of identity
  auto it = stack_ids.find(key);
  if (it != stack_ids.end()) return it->second;
  StackData s{(uint32_t)stack_frames.size(), (uint32_t)frame_ids.size(), backward, UINT32_MAX};
  s.linked = flags & fmt::kStackLinked;
  s.recomputed = flags & fmt::kStackRecomputed;
  for (uint32_t k = 0; k < frame_ids.size(); k++) {
    const uint32_t f = frame_ids[k];
    const FrameData& fr = frames[f];
    // Note [Backward on the forward line]: the pseudo-frames of a stack made while an autograd node ran.
    if (backward && s.separator == UINT32_MAX && !strings[fr.file].empty() && strings[fr.file][0] == '<') {
      if (strings[fr.file] == "<backward>") {
        s.separator = k;
        s.node = fr.name;
      } else if (strings[fr.file] == "<module>") {
        s.module = fr.name;
      }
    }
    if (s.user_frame == UINT32_MAX) {
      // Note [FX frames]: a compiled graph's line counts as the user's line it was traced from.
      auto fx = fx_frames.empty() ? fx_frames.end() : fx_frames.find(f);
      if (fx != fx_frames.end() && fx->second.origin != UINT32_MAX && is_user_file(frames[fx->second.origin].file))
        s.user_frame = fx->second.origin;
      else if (is_user_file(fr.file))
        s.user_frame = f;
    }
    if (s.separator != UINT32_MAX && k > s.separator && s.caller_frame == UINT32_MAX && is_user_file(fr.file))
      s.caller_frame = f;
    stack_frames.push_back(f);
  }
  uint32_t id = (uint32_t)stacks.size();
  stacks.push_back(s);
  stack_ids.emplace(std::move(key), id);
  return id;
}

void prefault_spare(void* begin, size_t bytes) {
#ifdef MADV_POPULATE_WRITE
  const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t a = ((uintptr_t)begin + page - 1) & ~(page - 1), b = ((uintptr_t)begin + bytes) & ~(page - 1);
  if (b > a) (void)madvise((void*)a, b - a, MADV_POPULATE_WRITE);
#else
  (void)begin, (void)bytes;
#endif
}

void prefault_columns_ahead(const std::vector<std::pair<void*, size_t>>& cols, size_t capacity,
                            const std::atomic<size_t>& progress, const std::atomic<bool>& running, size_t ahead) {
  size_t done = 0;
  while (running.load(std::memory_order_relaxed)) {
    size_t want = progress.load(std::memory_order_relaxed) + ahead;
    if (want > done) {
      for (const auto& [p, bytes] : cols) {
        size_t per = bytes / std::max<size_t>(capacity, 1);
        size_t from = std::min(done * per, bytes), to = std::min(want * per, bytes);
        if (to > from) prefault_spare(static_cast<char*>(p) + from, to - from);
      }
      done = want;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(300));
  }
}

void advise_huge(void* begin, size_t bytes) {
#ifdef MADV_HUGEPAGE
  constexpr uintptr_t kHuge = 2u << 20;
  if (bytes < 2 * kHuge) return;
  uintptr_t a = ((uintptr_t)begin + kHuge - 1) & ~(kHuge - 1), b = ((uintptr_t)begin + bytes) & ~(kHuge - 1);
  if (b > a) (void)madvise((void*)a, b - a, MADV_HUGEPAGE);
#else
  (void)begin, (void)bytes;
#endif
}

DeviceData& Model::device(int index) {
  auto it = devices.find(index);
  if (it != devices.end()) return it->second;
  DeviceData& d = devices[index];
  d.index = index;
  return d;
}

bool Model::is_user_file(uint32_t file_string_id) const { return is_user_path(strings[file_string_id], non_user_dirs); }

// One rule for the reader and the writer's index (native/format/user_frames.h).
bool is_user_path(std::string_view path, const std::vector<std::string>& internal_dirs) {
  return fmt::is_user_path(path, internal_dirs);
}

void Model::derive() {
  for (auto& [idx, d] : devices) derive_events(d);
  if (has_host) derive_events(host);
}

void Model::note_unknown_key(std::string_view where, std::string_view key, const std::string& raw) {
  for (auto& u : unknown_keys)
    if (u.where == where && u.key == key) return (void)u.count++;
  // A dict keyed by data (addresses, names) would name thousands: past 200 they are counted as one row.
  if (unknown_keys.size() >= 200) {
    UnknownKey& more = unknown_keys.back();
    if (more.key != "…") unknown_keys.push_back(UnknownKey{std::string(where), "…", 0, ""});
    unknown_keys.back().count++;
    return;
  }
  unknown_keys.push_back(UnknownKey{std::string(where), std::string(key), 1, raw});
}

bool Model::knows_unknown_key(std::string_view where, std::string_view key) const {
  for (const auto& u : unknown_keys)
    if (u.where == where && u.key == key) return true;
  return unknown_keys.size() >= 200;
}

void derive_events(DeviceData& d) {
  {
    size_t n = d.count();
    if (d.derived_up_to == 0) {
      d.peak_allocated = d.start_allocated;
      d.peak_index = -1;
      d.peak_reserved = d.start_reserved;
    }
    // Note [Huge columns]: the derived columns are reserved once and advised like the event columns (a first
    // open reserves them exactly; a live tail's growth keeps the vector's doubling). The allocated/reserved
    // series are appended, not resized: zero-filling 74 MB that the loop below overwrites cost 6 % of the open.
    if (n > d.allocated.capacity()) {
      size_t want = d.derived_up_to ? std::max(n, 2 * d.allocated.capacity()) : n;
      d.link.reserve(want), d.allocated.reserve(want), d.reserved.reserve(want);
      advise_huge(d.link.data() + d.link.size(), (d.link.capacity() - d.link.size()) * sizeof(uint32_t));
      advise_huge(d.allocated.data() + d.allocated.size(), (d.allocated.capacity() - d.allocated.size()) * 8);
      advise_huge(d.reserved.data() + d.reserved.size(), (d.reserved.capacity() - d.reserved.size()) * 8);
    }
    d.link.resize(n, kNoLink);
    int64_t a = d.derived_up_to ? d.allocated[d.derived_up_to - 1] : d.start_allocated;
    int64_t r = d.derived_up_to ? d.reserved[d.derived_up_to - 1] : d.start_reserved;
    for (size_t i = d.derived_up_to; i < n; i++) {
      switch (d.action[i]) {
        case ACT_ALLOC:
          a = wrap_add(a, d.size[i]);
          d.live_by_addr.put(d.addr[i], (uint32_t)i);
          break;
        case ACT_FREE_REQUESTED: {
          a = wrap_sub(a, d.size[i]);
          uint32_t j = d.live_by_addr.take(d.addr[i]);
          if (j != AddrIndexMap::kEmpty) {
            d.link[i] = j;
            d.link[j] = (uint32_t)i;
          }
          break;
        }
        case ACT_SEGMENT_ALLOC:
        case ACT_SEGMENT_MAP: r = wrap_add(r, d.size[i]); break;
        case ACT_SEGMENT_FREE:
        case ACT_SEGMENT_UNMAP: r = wrap_sub(r, d.size[i]); break;
        default: break;
      }
      d.allocated.push_back(a);
      d.reserved.push_back(r);
      // Strictly greater: the first event that reaches the maximum is "the event that reached it".
      if (a > d.peak_allocated) {
        d.peak_allocated = a;
        d.peak_index = (int64_t)i;
      }
      if (r > d.peak_reserved) d.peak_reserved = r;
    }
    d.derived_up_to = n;
  }
}

}  // namespace gpumem
