#include "model.h"

#include <cstring>
#include <sys/mman.h>
#include <unistd.h>

namespace gpumem {

const char* const kActionNames[ACT_COUNT] = {"alloc",         "free_requested", "free_completed", "segment_alloc",
                                             "segment_free",  "segment_map",    "segment_unmap",  "snapshot",
                                             "oom",           "empty_cache"};
const char* const kBlockStateNames[3] = {"inactive", "active_allocated", "active_pending_free"};

uint32_t Model::intern(std::string_view s) {
  auto it = stringIds.find(std::string(s));
  if (it != stringIds.end()) return it->second;
  uint32_t id = (uint32_t)strings.size();
  strings.emplace_back(s);
  stringIds.emplace(strings.back(), id);
  return id;
}

uint32_t Model::internFrame(uint32_t file, uint32_t name, uint32_t line) {
  auto [it, fresh] = frameIds.try_emplace({(uint64_t)file << 32 | name, line}, (uint32_t)frames.size());
  if (fresh) frames.push_back(FrameData{file, name, line});
  return it->second;
}

uint32_t Model::internStack(const std::vector<uint32_t>& frameIds, bool backward) {
  if (frameIds.empty() && !backward) return 0;
  std::vector<uint32_t> key = frameIds;
  key.push_back(backward ? 1 : 0);  // the flag is part of identity
  auto it = stackIds.find(key);
  if (it != stackIds.end()) return it->second;
  StackData s{(uint32_t)stackFrames.size(), (uint32_t)frameIds.size(), backward, UINT32_MAX};
  for (uint32_t f : frameIds) {
    if (s.userFrame == UINT32_MAX && isUserFile(frames[f].file)) s.userFrame = f;
    stackFrames.push_back(f);
  }
  uint32_t id = (uint32_t)stacks.size();
  stacks.push_back(s);
  stackIds.emplace(std::move(key), id);
  return id;
}

void prefaultSpare(void* begin, size_t bytes) {
#ifdef MADV_POPULATE_WRITE
  const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t a = ((uintptr_t)begin + page - 1) & ~(page - 1), b = ((uintptr_t)begin + bytes) & ~(page - 1);
  if (b > a) (void)madvise((void*)a, b - a, MADV_POPULATE_WRITE);
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

bool Model::isUserFile(uint32_t fileStringId) const {
  const std::string& f = strings[fileStringId];
  for (const std::string& dir : nonUserDirs)
    if (f.size() > dir.size() && f.compare(0, dir.size(), dir) == 0 && f[dir.size()] == '/') return false;
  return isUserPath(f);
}

bool isUserPath(std::string_view path) {
  // An empty file name cannot be opened either; it counts as "no user frame" (like '<string>').
  if (path.empty() || path[0] == '<') return false;
  std::string p(path);
  for (char& c : p)
    if (c == '\\') c = '/';
  if (p.find("site-packages/") != std::string::npos || p.find("dist-packages/") != std::string::npos) return false;
  // Standard library: …/lib/pythonX.Y/… (X.Y digits).
  for (size_t at = p.find("lib/python"); at != std::string::npos; at = p.find("lib/python", at + 1)) {
    if (at > 0 && p[at - 1] != '/') continue;
    size_t k = at + 10;
    size_t digits = 0;
    while (k < p.size() && (isdigit((unsigned char)p[k]) || p[k] == '.')) k++, digits++;
    if (digits > 0 && k < p.size() && p[k] == '/') return false;
  }
  return true;
}

void Model::derive() {
  for (auto& [idx, d] : devices) {
    size_t n = d.count();
    if (d.derivedUpTo == 0) {
      d.peakAllocated = d.startAllocated;
      d.peakIndex = -1;
      d.peakReserved = d.startReserved;
    }
    d.link.resize(n, kNoLink);
    d.allocated.resize(n);
    d.reserved.resize(n);
    int64_t a = d.derivedUpTo ? d.allocated[d.derivedUpTo - 1] : d.startAllocated;
    int64_t r = d.derivedUpTo ? d.reserved[d.derivedUpTo - 1] : d.startReserved;
    for (size_t i = d.derivedUpTo; i < n; i++) {
      switch (d.action[i]) {
        case ACT_ALLOC:
          a = wrapAdd(a, d.size[i]);
          d.liveByAddr.put(d.addr[i], (uint32_t)i);
          break;
        case ACT_FREE_REQUESTED: {
          a = wrapSub(a, d.size[i]);
          uint32_t j = d.liveByAddr.take(d.addr[i]);
          if (j != AddrIndexMap::kEmpty) {
            d.link[i] = j;
            d.link[j] = (uint32_t)i;
          }
          break;
        }
        case ACT_SEGMENT_ALLOC:
        case ACT_SEGMENT_MAP: r = wrapAdd(r, d.size[i]); break;
        case ACT_SEGMENT_FREE:
        case ACT_SEGMENT_UNMAP: r = wrapSub(r, d.size[i]); break;
        default: break;
      }
      d.allocated[i] = a;
      d.reserved[i] = r;
      // Strictly greater: the first event that reaches the maximum is "the event that reached it".
      if (a > d.peakAllocated) {
        d.peakAllocated = a;
        d.peakIndex = (int64_t)i;
      }
      if (r > d.peakReserved) d.peakReserved = r;
    }
    d.derivedUpTo = n;
  }
}

}  // namespace gpumem
