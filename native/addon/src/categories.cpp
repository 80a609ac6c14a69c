// categories.cpp — what every allocated byte is: see Note [Categories].
#include "categories.h"

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <set>
#include <string_view>
#include <unordered_map>

#include "aggregate.h"
#include "gpumem_format.h"
#include "json.h"
#include "samples.h"

namespace gpumem {

// Note [Categories]: every allocation gets one category for its whole life, decided by the reader from facts
// the workload writes cheaply (measured on an H100 by test/gpu/probes/categories_cost.py: global module hooks
// cost ×1.02 per step and broke 50 of 62 torch.compile graphs, so there are no per-module Python hooks; module
// paths come from the frames the stack capture walks, Note [Module paths from frames] in module_marks.h):
//   1. tags (REC_TAG, Note [Tags]): at each optimizer step the bootstrap names the parameters, their .grad and
//      the optimizer's state tensors by data pointer. The allocation live at that address (the block containing
//      it) is that category from its allocation to its free, also before the tag: a parameter moved to the
//      device before the first step is a parameter all along. A later tag of another category wins.
//   2. phases (MARK_PHASE begins, the "backward"/"optimizer.step" step facts end them). An untagged allocation
//      - made outside backward and optimizer steps, still live when the next backward begins and freed
//        during that backward, is an *activation* (saved for backward);
//      - allocated and freed inside one phase (one forward stretch, one backward, one optimizer step) is a
//        *temporary* (workspaces, intermediates);
//      - anything else is *other* (inputs, the loss, tensors kept across steps, and everything not freed yet:
//        a live capture's current forward is "other" until its backward frees it).
//      A capture with no phase facts (no backward seen, an older bootstrap) has no activations or
//      temporaries: everything untagged is other.
//   4. activations *kept by a container*: a graph that outlives its backward (backward(retain_graph=True)
//      then history.append(loss)) keeps its saved activations past the backward that would have freed them. The
//      bootstrap's leak keeper (Note [Leak keeper search] in native/python/gpumem/_keeper.py) writes, in its notice,
//      the address of every storage the kept tensors and their graphs hold (Note [Keeper graph walk]), and which of
//      them are the kept tensors' own ("own": the losses, a kept output: they stay what they were). The
//      allocations live at the others at the notice are kept activations, and so is every untagged
//      allocation of one of their lines (innermost user frame) with the same life: made outside backward and
//      optimizer steps, not freed by the next backward (freed later, or never), so the steps after the notice
//      count too. They are activations (by module as the rest), and `keptBytes` says how many of the activation
//      bytes are kept this way, per moment and per line; without a keeper notice nothing changes.
//   3. module of an activation, by path when the capture has module marks (Note [Module paths]): the innermost
//      module whose forward was running when it was allocated (`transformer.h.3.mlp`; the root module by its
//      class name). Without module marks (captures before format minor 4, GPUMEM_MODULE_PATHS=0) it falls back
//      to the innermost frame of its stack that is a `forward` method, recorded by its co_qualname (Note
//      [Forward frames] in stack_capture.cc): `GPT2MLP.forward` → module class `GPT2MLP`, all twelve GPT2MLPs
//      in one row. "moduleSource" in the JSON says which ("path" or "class"), and the UI says so. Under
//      torch.compile the compiled module's insides run no hooks and have no frames: their activations are
//      listed under the compiled module itself (coarser, and the UI says so).
// Allocations before the trace (a pickle's start state) have no events and are reported as `untraced`.

namespace {

// C_OVERHEAD is no allocation's category: it is where the bytes by which blocks exceed their tensors go (Note [Tensor
// bytes]), so that the categories still sum to allocated.
enum Cat : uint8_t {
  C_PARAMETER = 0,
  C_BUFFER,
  C_GRADIENT,
  C_OPTIMIZER,
  C_ACTIVATION,
  C_KV_CACHE,
  C_TEMPORARY,
  C_OTHER,
  C_OVERHEAD,
  C_COUNT
};
const char* const kCatNames[C_COUNT] = {"parameter", "buffer",    "gradient", "optimizer_state", "activation",
                                        "kv_cache",  "temporary", "other",    "block_overhead"};
using Bytes = std::array<uint64_t, C_COUNT>;
using LineKey = std::pair<uint32_t, uint32_t>;
constexpr uint32_t kNone = UINT32_MAX;

struct Segments {
  std::vector<uint32_t> at;        // boundary event indices, ascending
  std::vector<uint8_t> phase;      // phase after each boundary
  std::vector<uint32_t> next_bwd;  // per segment: the first backward segment after it (kNone: none)
  uint32_t of(size_t i) const { return (uint32_t)(std::upper_bound(at.begin(), at.end(), (uint32_t)i) - at.begin()); }
  uint8_t phase_of(uint32_t seg) const { return seg == 0 ? (uint8_t)PHASE_OTHER : phase[seg - 1]; }
};

Segments segments(const DeviceData& d) {
  Segments s;
  for (const PhaseMark& p : d.phases) s.at.push_back(p.event_index), s.phase.push_back(p.phase);
  s.next_bwd.assign(s.at.size() + 1, kNone);
  uint32_t next = kNone;
  for (size_t k = s.at.size() + 1; k-- > 0;) {
    s.next_bwd[k] = next;
    if (s.phase_of((uint32_t)k) == PHASE_BACKWARD) next = (uint32_t)k;
  }
  return s;
}

bool has_phase_begins(const DeviceData& d);

// One keeper notice (Note [Categories] 4): after events [0, after) of this device, the storages at `addrs` are held.
struct KeeperSeeds {
  size_t after;
  std::vector<uint64_t> addrs;
  bool all = false;  // an exit notice ("at": "end") listing every storage the kept tensors and their graphs hold
};

// The unsigned integers of the JSON array that follows `"key":` in `text` (json.dumps' output: `"addrs": [1, 2]`).
std::vector<uint64_t> json_uints(std::string_view text, std::string_view key, bool* found) {
  std::vector<uint64_t> out;
  const std::string quoted = "\"" + std::string(key) + "\"";
  size_t at = text.find(quoted);
  *found = at != std::string_view::npos;
  if (!*found) return out;
  at = text.find_first_not_of(" :", at + quoted.size());
  if (at == std::string_view::npos) return out;
  const bool array = text[at] == '[';
  if (array) at++;
  uint64_t v = 0;
  bool digits = false;
  for (; at < text.size(); at++) {
    const char c = text[at];
    if (c >= '0' && c <= '9') {
      v = v * 10 + (uint64_t)(c - '0');
      digits = true;
      continue;
    }
    if (digits) out.push_back(v);
    v = 0;
    digits = false;
    if (c == ']' || c == '}' || (!array && c != ' ') || c == '-') break;
  }
  if (digits) out.push_back(v);
  return out;
}

// The keeper notices that name device `index` (notices are process-wide: every device's markers are read).
std::vector<KeeperSeeds> keeper_seeds(const Model& m, const DeviceData& d) {
  constexpr std::string_view kPrefix = "\ngpumem-keeper ";
  std::vector<KeeperSeeds> out;
  for (const auto& [dev, dd] : m.devices) {
    for (const MarkerData& mk : dd.markers) {
      if (mk.kind != 6 || mk.label >= m.strings.size()) continue;  // 6: "notice" (kMarkerKinds)
      std::string_view text = m.strings[mk.label];
      const size_t at = text.find(kPrefix);
      if (at == std::string_view::npos) continue;
      text = text.substr(at + kPrefix.size());
      bool has_device = false, has_addrs = false;
      const std::vector<uint64_t> device = json_uints(text, "device", &has_device);
      if (has_device ? (device.size() != 1 || device[0] != (uint64_t)d.index) : dev != d.index) continue;
      std::vector<uint64_t> addrs = json_uints(text, "addrs", &has_addrs);
      // "own": the kept tensors' own storages (the losses): held, but not activations (Note [Categories] 4)
      bool has_own = false;
      std::vector<uint64_t> own = json_uints(text, "own", &has_own);
      std::sort(own.begin(), own.end());
      addrs.erase(std::remove_if(addrs.begin(), addrs.end(),
                                 [&](uint64_t a) { return std::binary_search(own.begin(), own.end(), a); }),
                  addrs.end());
      if (addrs.empty()) continue;
      // only the exit's notice: after a step end's, tensors live then and not yet kept may still be appended
      const bool all = text.find("\"addrs_all\": true") != std::string_view::npos &&
                       text.find("\"at\": \"end\"") != std::string_view::npos;
      out.push_back({events_up_to(d, (double)mk.t_us), std::move(addrs), all});
    }
  }
  std::sort(out.begin(), out.end(), [](const KeeperSeeds& a, const KeeperSeeds& b) { return a.after < b.after; });
  return out;
}

struct Categorized {
  std::vector<uint8_t> cat;
  std::vector<uint8_t> kept;  // per alloc: an activation kept by a container (Note [Categories] 4)
  bool has_keeper = false;
};

// Category per event index (meaningful for allocs only).
Categorized categorize(const Model& m, const DeviceData& d) {
  const size_t n = d.count();
  std::vector<uint8_t> tag(n, 0);  // fmt::TagCategory of allocs, 0 = untagged
  std::map<uint64_t, uint32_t> live;
  size_t k = 0;
  auto containing = [&](uint64_t addr) -> uint32_t {
    auto it = live.upper_bound(addr);
    if (it == live.begin()) return kNone;
    --it;
    return addr - it->first < d.size[it->second] ? it->second : kNone;
  };
  auto apply = [&](const TagData& t) {
    const uint32_t a = containing(t.addr);
    if (a != kNone) tag[a] = t.category;
  };
  const std::vector<KeeperSeeds> keepers = keeper_seeds(m, d);
  std::vector<uint32_t> seeds;  // allocs a keeper's notice names
  size_t ks = 0;
  auto seed = [&](const KeeperSeeds& s) {
    for (uint64_t a : s.addrs)
      if (uint32_t x = containing(a); x != kNone) seeds.push_back(x);
  };
  for (size_t i = 0; i < n; i++) {
    for (; k < d.tags.size() && d.tags[k].event_index <= i; k++) apply(d.tags[k]);
    for (; ks < keepers.size() && keepers[ks].after <= i; ks++) seed(keepers[ks]);
    if (d.action[i] == ACT_ALLOC)
      live[d.addr[i]] = (uint32_t)i;
    else if (d.action[i] == ACT_FREE_REQUESTED)
      live.erase(d.addr[i]);
  }
  for (; k < d.tags.size(); k++) apply(d.tags[k]);
  for (; ks < keepers.size(); ks++) seed(keepers[ks]);

  const Segments s = segments(d);
  const bool phases = has_phase_begins(d);
  Categorized out;
  std::vector<uint8_t>& cat = out.cat;
  cat.assign(n, C_OTHER);
  out.kept.assign(n, 0);
  out.has_keeper = !keepers.empty();
  // The lines of the allocations a keeper holds (innermost user frame; none for a stack without one).
  std::set<std::pair<uint32_t, uint32_t>> kept_lines;
  auto line_key = [&](uint32_t stack_id) -> std::pair<uint32_t, uint32_t> {
    const StackData& st = m.stacks[stack_id < m.stacks.size() ? stack_id : 0];
    if (st.user_frame == UINT32_MAX) return {kNone, 0};
    const FrameData& fr = m.frames[st.user_frame];
    return {fr.file, fr.line};
  };
  // Note [KV cache from frames]: a generate() loop's cache grows by torch.cat in the cache object's own methods
  // (transformers' DynamicLayer.update, StaticLayer.lazy_initialization, … in transformers/cache_utils.py), a frame
  // of every allocation the stack capture already records: an untagged allocation made under a frame of that file is
  // the KV cache, with nothing run in the workload. Per stack, computed once.
  std::unordered_map<uint32_t, bool> kv_of_stack;
  auto kv_cache = [&](uint32_t stack_id) {
    auto it = kv_of_stack.find(stack_id);
    if (it != kv_of_stack.end()) return it->second;
    bool kv = false;
    const StackData& st = m.stacks[stack_id < m.stacks.size() ? stack_id : 0];
    for (uint32_t k = 0; k < st.count && !kv; k++) {
      const std::string_view file = m.strings[m.frames[m.stack_frames[st.first + k]].file];
      constexpr std::string_view kCacheFile = "cache_utils.py";
      kv = file.size() > kCacheFile.size() && file.substr(file.size() - kCacheFile.size()) == kCacheFile &&
           (file[file.size() - kCacheFile.size() - 1] == '/' || file[file.size() - kCacheFile.size() - 1] == '\\') &&
           file.find("transformers") != std::string_view::npos;
    }
    return kv_of_stack.emplace(stack_id, kv).first->second;
  };
  // Note [Kept by address, then by line]: the keeper notice at the process's exit (Note [Keeper at the end] in
  // _keeper.py), when it lists every storage the kept graphs hold, says for each allocation live then whether it is
  // kept: nothing can be appended after it, so the address decides. (A step end's notice cannot: the step's own loss
  // may be appended after it.) Allocations not live at the last such notice (made after it,
  // in a run killed before its exit, or freed before it) fall back to the lines of what was kept. Before this rule,
  // one-off allocations on a kept line (cuBLAS's 32 MiB workspace, made in the first forward under the same user line
  // as every activation of a model from a library) counted as kept activations.
  // And when the container only grew (every storage any notice listed is still live at the exit's), nothing kept was
  // ever let go: an allocation freed before the exit was not kept, whatever its line (the current batch of a loop whose
  // labels, made on the same line, a kept graph saved).
  size_t listed_until = 0;
  for (const KeeperSeeds& k : keepers)
    if (k.all) listed_until = std::max(listed_until, k.after);
  const auto freed_at = [&](uint32_t a) { return a < d.link.size() ? d.link[a] : kNoLink; };
  const bool only_grew = listed_until > 0 && std::all_of(seeds.begin(), seeds.end(), [&](uint32_t a) {
                           return freed_at(a) == kNoLink || freed_at(a) >= listed_until;
                         });
  for (uint32_t a : seeds)
    if (!tag[a]) {
      out.kept[a] = 1;
      if (auto key = line_key(d.stack[a]); key.first != kNone) kept_lines.insert(key);
    }
  for (size_t i = 0; i < n; i++) {
    if (d.action[i] != ACT_ALLOC) continue;
    switch (tag[i]) {
      case fmt::TAG_PARAMETER: cat[i] = C_PARAMETER; continue;
      case fmt::TAG_BUFFER: cat[i] = C_BUFFER; continue;
      case fmt::TAG_GRADIENT: cat[i] = C_GRADIENT; continue;
      case fmt::TAG_OPTIMIZER_STATE: cat[i] = C_OPTIMIZER; continue;
      default: break;
    }
    // held by a kept graph (by address) before the KV cache: a training forward's cache tensors that a kept graph
    // saved are kept activations (a model whose config leaves use_cache on, as OPT's does, builds one each forward)
    if (out.kept[i]) {
      cat[i] = C_ACTIVATION;
      continue;
    }
    if (kv_cache(d.stack[i])) {
      cat[i] = C_KV_CACHE;
      continue;
    }
    const uint32_t f = i < d.link.size() ? d.link[i] : kNoLink;
    if (!phases) continue;
    const uint32_t sa = s.of(i), sf = f == kNoLink ? kNone : s.of(f);
    if (sa == sf)
      cat[i] = C_TEMPORARY;
    else if (s.phase_of(sa) == PHASE_OTHER && s.next_bwd[sa] == sf && sf != kNone)
      cat[i] = C_ACTIVATION;
    else if (!kept_lines.empty() && !(i < listed_until && (only_grew || f == kNoLink || f >= listed_until)) &&
             s.phase_of(sa) == PHASE_OTHER && s.next_bwd[sa] != kNone && (sf == kNone || sf > s.next_bwd[sa]) &&
             kept_lines.count(line_key(d.stack[i])))
      cat[i] = C_ACTIVATION, out.kept[i] = 1;  // outlived its backward, on a line a keeper holds
  }
  return out;
}

// Phase facts exist only where a phase began: the step facts that end phases are older than the begins.
bool has_phase_begins(const DeviceData& d) {
  return std::any_of(d.phases.begin(), d.phases.end(), [](const PhaseMark& p) { return p.phase != PHASE_OTHER; });
}

// Note [Module paths]: the innermost open module (a string id) at each alloc event, from the MARK_MODULE_*
// begins and ends; kNone where none is open. An end pops back to its begin of the same path (an exception that
// skipped inner ends leaves nothing open inside it); an end without a begin is ignored.
std::vector<uint32_t> module_paths(const DeviceData& d) {
  std::vector<uint32_t> out(d.count(), kNone);
  std::vector<uint32_t> open;
  size_t k = 0;
  for (size_t i = 0; i < d.count(); i++) {
    for (; k < d.module_marks.size() && d.module_marks[k].event_index <= i; k++) {
      const ModuleMark& mk = d.module_marks[k];
      if (mk.begin) {
        open.push_back(mk.path);
      } else {
        auto it = std::find(open.rbegin(), open.rend(), mk.path);
        if (it != open.rend()) open.erase(std::next(it).base(), open.end());
      }
    }
    if (d.action[i] == ACT_ALLOC && !open.empty()) out[i] = open.back();
  }
  return out;
}

bool is_forward(std::string_view name) {
  constexpr std::string_view kForward = "forward";
  if (name == kForward) return true;
  return name.size() > kForward.size() + 1 &&
         name.compare(name.size() - kForward.size(), kForward.size(), kForward) == 0 &&
         name[name.size() - kForward.size() - 1] == '.';
}

}  // namespace

std::string categories_json(const Model& m, int index, const std::vector<double>& times_us, bool with_lines) {
  json::Writer j;
  j.open('{');
  auto found = m.devices.find(index);
  if (found == m.devices.end()) {
    j.kvb("hasTags", false).kvb("hasPhases", false).kvs("moduleSource", "class").key("categories").open('[');
    for (const char* c : kCatNames) j.item().str(c);
    j.close(']').key("peak").raw("null").key("moments").open('[').close(']');
    return j.close('}').s;
  }
  const DeviceData& d = found->second;
  const size_t n = d.count();
  const Categorized categorized = categorize(m, d);
  const std::vector<uint8_t>& cat = categorized.cat;
  const std::vector<uint8_t>& kept = categorized.kept;
  const bool by_path = !d.module_marks.empty();
  const std::vector<uint32_t> path_of = by_path ? module_paths(d) : std::vector<uint32_t>();

  // Module (string id of the forward frame's function) per stack, computed once per stack.
  std::unordered_map<uint32_t, uint32_t> module_of_stack;
  auto module_of = [&](uint32_t stack_id) {
    auto it = module_of_stack.find(stack_id);
    if (it != module_of_stack.end()) return it->second;
    uint32_t mod = kNone;
    const StackData& st = m.stacks[stack_id < m.stacks.size() ? stack_id : 0];
    for (uint32_t k = 0; k < st.count && mod == kNone; k++) {
      const FrameData& fr = m.frames[m.stack_frames[st.first + k]];
      if (is_forward(m.strings[fr.name])) mod = fr.name;
    }
    return module_of_stack.emplace(stack_id, mod).first->second;
  };
  auto line_of = [&](uint32_t stack_id) -> LineKey {
    const StackData& st = m.stacks[stack_id < m.stacks.size() ? stack_id : 0];
    if (st.user_frame == UINT32_MAX) return {kNone, 0};
    const FrameData& fr = m.frames[st.user_frame];
    return {fr.file, fr.line};
  };

  // Moments in time order: the peak (exactly after the event that reached it) and the asked times.
  struct Moment {
    size_t after;  // events [0, after) have happened
    double t_us;
    int slot;  // -1 = peak, else index into times_us
  };
  std::vector<Moment> moments;
  moments.push_back({d.peak_index < 0 ? 0 : (size_t)d.peak_index + 1,
                     d.peak_index < 0 ? (n ? (double)d.t[0] : 0) : (double)d.t[d.peak_index], -1});
  for (size_t k = 0; k < times_us.size(); k++) moments.push_back({events_up_to(d, times_us[k]), times_us[k], (int)k});
  std::stable_sort(moments.begin(), moments.end(), [](const Moment& a, const Moment& b) { return a.after < b.after; });

  std::vector<std::string> out(times_us.size() + 1);
  const MomentSamples moment_samples(m, d);
  const int64_t figures_from = figures_from_us(m, d);
  Bytes live{};
  uint64_t kept_live = 0;
  std::map<uint32_t, uint64_t> modules;
  std::map<LineKey, Bytes> lines;
  std::map<LineKey, uint64_t> kept_lines;
  size_t i = 0;
  for (const Moment& mo : moments) {
    for (; i < mo.after && i < n; i++) {
      const uint8_t act = d.action[i];
      if (act != ACT_ALLOC && !(act == ACT_FREE_REQUESTED && d.link[i] != kNoLink)) continue;
      const size_t a = act == ACT_ALLOC ? i : d.link[i];
      // Note [Tensor bytes]: a category holds its tensors' bytes (the requests: a storage's nbytes), the same in both
      // allocator modes; what a block holds beyond its request (the 512 B rounding, PyTorch's unsplit remainder of a
      // large block, which can be a MiB) is block overhead, its own row, so that the rows still sum to allocated.
      const uint64_t sz = d.size[a] - d.waste[a], over = d.waste[a];
      const uint8_t c = cat[a];
      const bool add = act == ACT_ALLOC;
      live[c] = add ? live[c] + sz : live[c] - std::min(live[c], sz);
      live[C_OVERHEAD] = add ? live[C_OVERHEAD] + over : live[C_OVERHEAD] - std::min(live[C_OVERHEAD], over);
      if (kept[a]) kept_live = add ? kept_live + sz : kept_live - std::min(kept_live, sz);
      if (c == C_ACTIVATION) {
        const uint32_t mod = by_path ? path_of[a] : module_of(d.stack[a]);
        uint64_t& b = modules[mod];
        b = add ? b + sz : b - std::min(b, sz);
        if (!b) modules.erase(mod);
      }
      if (with_lines) {
        const LineKey key = line_of(d.stack[a]);
        Bytes& b = lines[key];
        b[c] = add ? b[c] + sz : b[c] - std::min(b[c], sz);
        b[C_OVERHEAD] = add ? b[C_OVERHEAD] + over : b[C_OVERHEAD] - std::min(b[C_OVERHEAD], over);
        if (kept[a]) {
          uint64_t& kb = kept_lines[key];
          kb = add ? kb + sz : kb - std::min(kb, sz);
        }
      }
    }
    // Note [Figures after the events] (model.h): no category is known where the events say nothing (a device of
    // figures only, a moment after the events stopped): null, never the last recorded state passed off as then.
    if (d.figures_only() || (mo.slot >= 0 && mo.t_us >= (double)figures_from)) {
      out[mo.slot + 1] = "null";
      continue;
    }
    const bool want_lines = with_lines && (mo.slot == -1 || mo.slot + 1 == (int)times_us.size());
    json::Writer o;
    // Note [Moment events]: the moment is exactly after `events` events. Times are in µs and several events can
    // share one (the peak's allocation and a free right after it), so a state asked for by time alone may include
    // events after the peak; stateAt(device, timeUs, events) gives this very moment's layout.
    o.open('{').kvd("timeUs", mo.t_us).kvu("events", mo.after);
    const int64_t allocated = mo.after ? d.allocated[mo.after - 1] : d.start_allocated;
    const int64_t reserved = mo.after ? d.reserved[mo.after - 1] : d.start_reserved;
    uint64_t sum = 0;
    o.kv("allocatedBytes", allocated).kv("reservedBytes", reserved).key("bytes").open('{');
    for (int c = 0; c < C_COUNT; c++) o.kvu(kCatNames[c], live[c]), sum += live[c];
    o.close('}').kv("untracedBytes", wrap_sub(allocated, sum));
    if (categorized.has_keeper) o.kvu("keptBytes", kept_live);
    // Beyond allocated: one device sample, with its own reserved (Note [Device samples of a moment] in samples.cpp).
    if (const DeviceReading dr = moment_samples.pick(mo.after, mo.t_us); dr.sample) {
      if (dr.of_moment) o.kvu("deviceUsedBytes", dr.sample->used);
      o.kvu("notFromAllocatorBytes", dr.outside()).key("deviceSample").open('{').kv("timeUs", dr.sample->t_us);
      o.kvu("usedBytes", dr.sample->used).kv("reservedBytes", dr.reserved).close('}');
    }
    std::vector<std::pair<uint32_t, uint64_t>> mods(modules.begin(), modules.end());
    std::sort(mods.begin(), mods.end(),
              [](auto& x, auto& y) { return x.second != y.second ? x.second > y.second : x.first < y.first; });
    o.key("modules").open('[');
    for (const auto& [mod, b] : mods) {
      std::string_view name = mod == kNone ? std::string_view(by_path ? "<outside any module>" : "<no forward frame>")
                                           : std::string_view(m.strings[mod]);
      if (name.size() > 8 && name.substr(name.size() - 8) == ".forward") name = name.substr(0, name.size() - 8);
      o.open('{').kvs("module", name).kvu("bytes", b).close('}');
    }
    o.close(']');
    if (want_lines) {
      o.key("lines").open('[');
      for (const auto& [k, b] : lines) {
        uint64_t total = 0;
        for (uint64_t v : b) total += v;
        if (!total) continue;
        o.open('{').kvs("file",
                        k.first == kNone ? std::string_view("<no user frame>") : std::string_view(m.strings[k.first]));
        o.kv("line", k.second).key("bytes").open('{');
        for (int c = 0; c < C_COUNT; c++)
          if (b[c]) o.kvu(kCatNames[c], b[c]);
        o.close('}');
        if (auto kb = kept_lines.find(k); kb != kept_lines.end() && kb->second) o.kvu("keptBytes", kb->second);
        o.close('}');
      }
      o.close(']');
    }
    out[mo.slot + 1] = o.close('}').s;
  }
  j.kvb("hasTags", !d.tags.empty())
      .kvb("hasPhases", has_phase_begins(d))
      .kvs("moduleSource", by_path ? "path" : "class")
      .key("categories")
      .open('[');
  for (const char* c : kCatNames) j.item().str(c);
  j.close(']');
  j.key("peak").raw(out[0]).key("moments").open('[');
  for (size_t k = 1; k < out.size(); k++) j.item().raw(out[k]);
  j.close(']');
  return j.close('}').s;
}

}  // namespace gpumem
