#include "model.h"

#include <sys/mman.h>
#include <unistd.h>
#include <cstring>

#include "torch_snapshot.h"

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

bool Model::isUserFile(uint32_t fileStringId) const { return isUserPath(strings[fileStringId], nonUserDirs); }

namespace {
bool isDigit(char c) { return c >= '0' && c <= '9'; }
// "python3", "python3.12", "python3.13t": a standard-library directory name.
bool isPythonVersionDir(std::string_view d) {
  if (d.substr(0, 6) != "python") return false;
  size_t k = 6, n = d.size();
  if (n > k && d[n - 1] == 't') n--;  // free-threaded build
  size_t major = k;
  while (k < n && isDigit(d[k])) k++;
  if (k == major) return false;
  if (k < n && d[k] == '.') {
    size_t minor = ++k;
    while (k < n && isDigit(d[k])) k++;
    if (k == minor) return false;
  }
  return k == n;
}
}  // namespace

bool isUserPath(std::string_view path, const std::vector<std::string>& internalDirs) {
  // Note [User frames]: a pseudo-file or an empty name cannot be opened or annotated: not the user's line.
  if (path.empty() || path[0] == '<') return false;
  std::string p(path);
  for (char& c : p)
    if (c == '\\') c = '/';
  for (std::string dir : internalDirs) {
    for (char& c : dir)
      if (c == '\\') c = '/';
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    if (!dir.empty() && p.size() > dir.size() && p.compare(0, dir.size(), dir) == 0 && p[dir.size()] == '/')
      return false;
  }
  // Directory names only (the last component is the file itself).
  std::string_view prev;
  size_t start = 0;
  for (size_t slash = p.find('/'); slash != std::string::npos; start = slash + 1, slash = p.find('/', start)) {
    std::string_view dir(p.data() + start, slash - start);
    if (dir == "site-packages" || dir == "dist-packages") return false;
    if ((prev == "lib" || prev == "lib64") && isPythonVersionDir(dir)) return false;
    prev = dir;
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
