// gpumem_format.h — the capture file's records, shared by the writer (native/allocator) and the
// reader (native/addon). FORMAT.md beside this file is the prose spec; this header is the contract.
//
// Layout: FileHeader, header JSON (FileHeader::json_bytes long), then records until end of file.
// Every record is a RecordHeader followed by `payload_bytes` of payload. All integers little-endian.
// Records are append-only; a reader stops at the first record that is incomplete (a crash or a live
// tail) or invalid (damage), and reports the offset.
//
// Note [Versioning]: `major` changes when an existing record's layout changes (readers reject a newer
// major with an actionable message); `minor` changes when record types are added (readers skip record
// types they do not know, using payload_bytes). Payload structs may grow at the end within a major
// version: readers must accept payload_bytes >= sizeof(struct) and ignore the extra bytes.
#pragma once
#include <stdint.h>

#ifdef __cplusplus
namespace gpumem {
namespace fmt {
#define GPUMEM_CONSTEXPR constexpr
#else
#define GPUMEM_CONSTEXPR static const
#endif

GPUMEM_CONSTEXPR char kMagic[8] = {'G', 'P', 'U', 'M', 'E', 'M', '\r', '\n'};
GPUMEM_CONSTEXPR uint16_t kMajor = 1;
GPUMEM_CONSTEXPR uint16_t kMinor = 10;  // 1: REC_DEVICE · 2: EndRec.reason/message, DeviceRec.pci_bus_id · 3: REC_TAG,
                                        // MARK_PHASE · 4: MARK_MODULE_* · 5: REC_AGGREGATED, REC_TIMELINE,
                                        // REC_LINE_TOTALS, kRestated (Note [Capture budget]) · 6: REC_INDEX,
                                        // EndRec.index_bytes (Note [Capture index]) · 7: REC_USER_METADATA
                                        // (Note [User metadata]), the index's sections (lines at the peak,
                                        // device names, losses; a reader skips a kind it does not know) ·
                                        // 8: MARK_EVENTS_OFF (Note [Recorded steps]) · 9: TAG_BUFFER, notices
                                        // up to 1 MiB (Note [Long notices]) · 10: kStackLinked,
                                        // kStackRecomputed (Note [Backward on the forward line])
// Upper bound on one record's payload; a larger length means damage, not a real record.
GPUMEM_CONSTEXPR uint32_t kMaxPayload = 64u << 20;
GPUMEM_CONSTEXPR uint32_t kMaxHeaderJson = 1u << 20;

#pragma pack(push, 1)

struct FileHeader {
  char magic[8];        // kMagic
  uint16_t major;       // kMajor
  uint16_t minor;       // kMinor
  uint32_t json_bytes;  // length of the UTF-8 JSON document that follows (see FORMAT.md "Header JSON")
};

enum RecordType : uint8_t {
  // Interned tables (must precede the first record that refers to them).
  REC_STRING = 1,  // StringRec + `len` bytes of UTF-8
  REC_FRAME = 2,   // FrameRec
  REC_STACK = 3,   // StackRec + nframes × uint32 frame ids, innermost first
  // Allocator events (times: CLOCK_MONOTONIC ns; header JSON's clock anchors convert to wall time).
  REC_ALLOC = 10,           // BlockEvent: a block handed to a tensor
  REC_FREE_REQUESTED = 11,  // BlockEvent: the tensor released it
  REC_FREE_COMPLETED = 12,  // BlockEvent: back in the pool (after record_stream events completed)
  REC_SEGMENT_ALLOC = 13,   // SegmentEvent: memory taken from the driver (cuMemAlloc / a new VA range)
  REC_SEGMENT_FREE = 14,    // SegmentEvent: memory given back to the driver
  REC_SEGMENT_MAP = 15,     // SegmentEvent: pages mapped into an expandable segment (addr/size = the pages)
  REC_SEGMENT_UNMAP = 16,   // SegmentEvent: pages unmapped from an expandable segment
  REC_EMPTY_CACHE = 20,     // EmptyCacheRec
  REC_OOM = 21,             // OomRec, followed by a REC_STATE of the same device
  REC_STATE = 30,           // StateRec + segments (StateSegment + blocks (StateBlock))
  REC_DEVICE_SAMPLE = 40,   // DeviceSampleRec: device-wide used/total (NVML or cuMemGetInfo)
  REC_MARKER = 41,          // MarkerRec: user markers, record_function ranges, snapshots
  REC_NOTICE = 42,          // NoticeRec: something the user must know (e.g. cudnn.benchmark forced off)
  REC_STATS = 43,           // StatsRec: the allocator's counters at a moment (for the live status)
  REC_DEVICE = 44,          // DeviceRec: a device the allocator manages (minor 1; before its first event)
  REC_TAG = 45,             // TagRec: the memory at an address is a parameter/gradient/optimizer state (minor 3)
  REC_AGGREGATED = 46,      // AggregatedRec: a time range whose block events were compacted away (minor 5)
  REC_TIMELINE = 47,     // TimelineRec + nbuckets × TimelineBucket: allocated/reserved min/max of that range (minor 5)
  REC_LINE_TOTALS = 48,  // LineTotalsRec + n × LineTotal: allocations per stack in that range (minor 5)
  REC_INDEX = 49,  // IndexRec + per device IndexDevice + nbuckets × IndexBucket: the whole run's overview (minor 6)
  REC_LOST = 50,   // LostRec: events dropped because the writer's bound was hit
  REC_USER_METADATA = 51,  // UserMetadataRec: a thread's memory label from now on (minor 7, Note [User metadata])
  REC_END = 60,            // EndRec: clean shutdown; absence means the process died
};

struct RecordHeader {
  uint8_t type;            // RecordType
  uint8_t device;          // CUDA device index (0 for records not tied to a device)
  uint16_t flags;          // per-type flags (below); 0 otherwise
  uint32_t payload_bytes;  // bytes after this header
};

struct StringRec {
  uint32_t id;   // ids start at 1; 0 means "none"
  uint32_t len;  // bytes of UTF-8 that follow
};

struct FrameRec {
  uint32_t id;        // ids start at 1
  uint32_t file;      // string id
  uint32_t function;  // string id
  uint32_t line;      // 1-based; 0 if unknown
};

// StackRec.flags
GPUMEM_CONSTEXPR uint32_t kStackBackward = 1u << 0;  // allocated on an autograd thread; frames are those
                                                     // of the thread waiting in backward()
// Note [Backward on the forward line] (native/allocator/src/backward_links.h), minor 10: allocated while an autograd
// node ran, linked to the forward op that made the node. The frames are: the node's own Python frames, if any (a
// checkpoint's recomputation, a custom Function's backward), the forward op's frames, a frame of file "<module>"
// named by the forward module's path (when known), a frame of file "<backward>" named by the node, then the frames
// of the thread waiting in backward(). kStackBackward is set too.
GPUMEM_CONSTEXPR uint32_t kStackLinked = 1u << 1;
// ... and the node's own frames recompute a checkpointed forward (torch.utils.checkpoint) (minor 10).
GPUMEM_CONSTEXPR uint32_t kStackRecomputed = 1u << 2;
struct StackRec {
  uint32_t id;  // ids start at 1; stack id 0 = no Python frames
  uint32_t flags;
  uint32_t nframes;
  // uint32_t frames[nframes];  innermost first
};

// RecordHeader.flags for block and segment events: which pool.
GPUMEM_CONSTEXPR uint16_t kPoolSmall = 1u << 0;      // small pool (≤1 MiB requests)
GPUMEM_CONSTEXPR uint16_t kPoolLarge = 1u << 1;      // large pool
GPUMEM_CONSTEXPR uint16_t kPoolPrivate = 1u << 2;    // a graph-private pool (see pool_id)
GPUMEM_CONSTEXPR uint16_t kSegExpandable = 1u << 3;  // the segment is an expandable (VA-mapped) one
// RecordHeader.flags on REC_ALLOC / REC_FREE_REQUESTED (minor 5): a restated event. It stands for block events a
// budgeted capture compacted away (Note [Capture budget]): after a run of restated events the live blocks are
// exactly those of the moment they are stamped with. Not a hand-out: readers skip it in allocation counts and
// totals (REC_LINE_TOTALS carries those). Readers older than minor 5 count it as an ordinary event. On a
// REC_USER_METADATA (minor 7): a label a compacted range writes around its restated allocations (Note [Labels of
// restated blocks], compactor.cc); a reader applies it like any other.
GPUMEM_CONSTEXPR uint16_t kRestated = 1u << 8;

struct BlockEvent {
  uint64_t t_ns;
  uint64_t addr;
  uint64_t size;       // block size (rounded; what the allocator handed out)
  uint64_t requested;  // bytes the caller asked for
  uint64_t stream;     // cudaStream_t as an integer (0 = legacy default stream)
  uint32_t stack;      // stack id at the event (alloc: the caller; free: the freeing thread or 0)
  uint32_t thread;     // small per-process thread number (0 = main thread)
};

struct SegmentEvent {
  uint64_t t_ns;
  uint64_t addr;
  uint64_t size;
  uint64_t stream;
  uint64_t pool_id0;  // graph pool id (PyTorch MempoolId_t.first), 0 for the default pools
  uint64_t pool_id1;  // MempoolId_t.second
  uint32_t stack;
  uint32_t reserved;
};

struct EmptyCacheRec {
  uint64_t t_ns;
  uint64_t reserved_before;
  uint64_t reserved_after;
  uint32_t origin;  // 0 = torch.cuda.empty_cache(), 1 = control channel, 2 = OOM ladder
  uint32_t reserved;
};

struct OomRec {
  uint64_t t_ns;
  uint64_t requested;    // bytes asked for (before rounding)
  uint64_t device_free;  // driver's free bytes at the failure
  uint64_t device_total;
  uint64_t reserved;      // reserved_bytes.all.current
  uint64_t allocated;     // allocated_bytes.all.current
  uint64_t largest_free;  // largest free block in the allocator's cache
  uint64_t stream;
  uint64_t limit;  // cap from memory_fraction (0 = none)
  uint32_t stack;
  uint32_t reserved_pad;
};

// Block states in a StateBlock (same meaning as PyTorch snapshot states).
enum BlockState : uint8_t {
  BLOCK_INACTIVE = 0,             // 'inactive'
  BLOCK_ACTIVE_ALLOCATED = 1,     // 'active_allocated'
  BLOCK_ACTIVE_PENDING_FREE = 2,  // 'active_pending_free' (freed, waiting on record_stream events)
};

struct StateRec {
  uint64_t t_ns;
  uint32_t snapshot_id;  // increments per state record of the process
  uint32_t reason;       // 0 = request, 1 = OOM, 2 = exit, 3 = resync after REC_LOST
  uint32_t nsegments;
  uint32_t reserved;
  // then nsegments × (StateSegment, StateSegment.nblocks × StateBlock)
};

struct StateSegment {
  uint64_t addr;
  uint64_t size;  // total_size (for expandable segments: the mapped size)
  uint64_t stream;
  uint64_t pool_id0;
  uint64_t pool_id1;
  uint32_t stack;  // stack that created the segment
  uint16_t flags;  // kPool* | kSegExpandable
  uint16_t pad;
  uint32_t nblocks;
  uint32_t pad2;
};

struct StateBlock {
  uint64_t addr;
  uint64_t size;
  uint64_t requested;
  uint32_t stack;  // stack of the last hand-out (0 if never allocated)
  uint8_t state;   // BlockState
  uint8_t pad[3];
};

struct DeviceSampleRec {
  uint64_t t_ns;
  uint64_t used;  // device-wide used bytes (what nvidia-smi shows)
  uint64_t total;
  // This process's share: 0, not known (the recorder no longer asks: Note [One NVML call a sample], device_sampler.cc).
  uint64_t process_used;
};

enum MarkerKind : uint32_t {
  MARK_INSTANT = 0,   // gpumem.mark("name")
  MARK_BEGIN = 1,     // record_function enter
  MARK_END = 2,       // record_function exit
  MARK_SNAPSHOT = 3,  // a snapshot was taken (name = pickle path)
  // MARK_STEP: a training-step fact (Note [Steps] in src/core/analyses/steps): "optimizer.step", "backward" or
  // gpumem.step(name).
  MARK_STEP = 4,
  // MARK_PHASE: a phase begins (minor 3): "backward" or "optimizer"; it ends at the next MARK_STEP fact of the same
  // name ("backward" / "optimizer.step"); Note [Categories] in native/addon/src/categories.cpp
  MARK_PHASE = 5,
  // MARK_MODULE_BEGIN: a module's forward starts (minor 4): name = its path ("transformer.h.3.mlp"); Note [Module
  // paths]. MARK_MODULE_END: that forward returns (name = the same path); begins and ends nest like a call stack.
  MARK_MODULE_BEGIN = 6,
  MARK_MODULE_END = 7,
  // MARK_EVENTS_OFF (minor 8): from this moment on the process's allocations, frees and segment events are no longer
  // recorded one by one (name = why: "recordSteps 5"); a process-wide fact (written once, device 0) that holds for
  // every device. The REC_STATS samples after it carry the figures: allocated, reserved and their peaks as PyTorch's
  // stats give them (Note [Recorded steps] in native/python/gpumem/_recorded_steps.py; the reader: Note [Figures after
  // the events] in native/addon/src/model.h).
  MARK_EVENTS_OFF = 8,
};

struct MarkerRec {
  uint64_t t_ns;
  uint32_t name;  // string id
  uint32_t kind;  // MarkerKind
};

struct NoticeRec {
  uint64_t t_ns;
  uint32_t text;   // string id
  uint32_t level;  // 0 info, 1 warning, 2 error
};

struct StatsRec {
  uint64_t t_ns;
  uint64_t allocated;       // allocated_bytes.all.current
  uint64_t reserved;        // reserved_bytes.all.current
  uint64_t active;          // active_bytes.all.current
  uint64_t requested;       // requested_bytes.all.current
  uint64_t peak_allocated;  // allocated_bytes.all.peak
  uint64_t peak_reserved;   // reserved_bytes.all.peak
  uint64_t num_ooms;
  uint64_t num_alloc_retries;
};

// Note [Devices]: the header JSON is written when the capture opens, before CUDA is initialised, so it
// cannot list devices; each device is announced by a REC_DEVICE once PyTorch initialises the allocator.
struct DeviceRec {
  uint64_t t_ns;
  uint64_t total_bytes;  // device memory capacity (0 if unknown)
  uint32_t name;         // string id ("NVIDIA H200", "simulated device")
  uint32_t pci_bus_id;   // string id ("0000:3B:00.0"), 0 = unknown (was `pad`, always 0, before minor 2)
};

// Note [Tags]: the bootstrap names what some tensors are at each optimizer step, and the weights of each module tree
// the first time one of its forwards runs (Note [Categories]); the reader gives the category to the allocation live
// at `addr` (the block containing it) for its whole life.
enum TagCategory : uint32_t {
  TAG_PARAMETER = 1,
  TAG_GRADIENT = 2,
  TAG_OPTIMIZER_STATE = 3,
  TAG_BUFFER = 4,  // minor 9: a module's buffer (BatchNorm's running statistics, a rotary table), not a parameter
};

struct TagRec {
  uint64_t t_ns;
  uint64_t addr;      // tensor.data_ptr()
  uint64_t size;      // tensor.nbytes (may be less than the block: a view)
  uint32_t category;  // TagCategory
  uint32_t name;      // string id: what the tensor is (e.g. a parameter's name), 0 = none
};

// Note [Capture budget]: a capture with a disk budget (configure "budget_bytes") keeps every event of a recent
// window and compacts what leaves it: block events go, and in their place a REC_AGGREGATED names the time range,
// REC_TIMELINE records per bucket min/max of allocated and reserved, REC_LINE_TOTALS the allocation count and bytes
// per stack, and restated REC_ALLOC/REC_FREE_REQUESTED (kRestated) set the live blocks to those of the moments users
// open: the device's new global peak of allocated bytes, every REC_OOM and REC_STATE, and the end of the range.
// Tags follow their blocks' restated allocations. Everything else (tables, segment events, samples, markers, notices,
// empty cache, OOM, state) stays verbatim, until the compacted ranges outgrow a quarter of the budget: then they are
// merged into one and thinned (Note [Budget as a cap] in native/allocator/src/compactor.cc). The file is rewritten (a
// new file renamed over the old one) when it reaches the budget; readers that tail it reopen it when its inode changes.
struct AggregatedRec {
  uint64_t t_begin_ns;    // first record of the compacted range
  uint64_t t_end_ns;      // last record of the compacted range; the window of full detail starts after it
  uint64_t events;        // block events (alloc/free) compacted away
  uint64_t bytes;         // bytes of records compacted away
  uint64_t budget_bytes;  // the capture's budget
  uint32_t restated;      // restated events written for this range
  uint32_t peaks;         // new global peaks (all devices) restated in this range
};

struct TimelineRec {
  uint64_t bucket_ns;  // width of a bucket
  uint32_t nbuckets;
  uint32_t pad;
  // then nbuckets × TimelineBucket, in time order; buckets without events are left out
};

struct TimelineBucket {
  uint64_t t_ns;  // bucket start
  int64_t allocated_min;
  int64_t allocated_max;
  int64_t reserved_min;
  int64_t reserved_max;
};

struct LineTotalsRec {
  uint32_t n;
  uint32_t pad;
  // then n × LineTotal
};

struct LineTotal {
  uint32_t stack;  // stack id (0 = no Python frames)
  uint32_t pad;
  uint64_t count;  // allocations (REC_ALLOC, not restated) compacted away
  uint64_t bytes;  // their block bytes
};

// Note [User metadata] (minor 7): PyTorch's torch.cuda.memory._set_memory_metadata(text) labels the trace entries
// its caching allocator records from then on, on the calling thread (any device; autograd's worker threads keep
// their own, empty, label), as each entry's `user_metadata`. A REC_USER_METADATA says that from this record on,
// every block event (REC_ALLOC, REC_FREE_REQUESTED, REC_FREE_COMPLETED) of any device whose BlockEvent.thread is
// `thread` carries `text` as its user_metadata, until the next REC_USER_METADATA of the same thread (text 0: none).
// A change record, not a field of BlockEvent: a run that never labels memory pays nothing, and BlockEvent keeps its
// layout (a new field on every event would cost 8 bytes each and, placed anywhere but the end, a major version).
// Written by the lens allocator's shim of _set_memory_metadata (native/python/gpumem/_shims.py) and, in the
// PyTorch-allocator mode, by the observer whenever a thread's trace entries change their user_metadata, each before
// the events it labels (one writer buffer, so a thread's records are in its program order). A budgeted capture's
// compacted range writes the labels its restated allocations had again around them (Note [Labels of restated
// blocks], native/allocator/src/compactor.cc). The reader keeps the label of each event as a pickle's
// user_metadata (native/addon/src/capture_decoder.cpp) and an exported pickle carries it on those trace entries.
struct UserMetadataRec {
  uint64_t t_ns;
  uint32_t text;    // string id of the label; 0 = none (cleared: "" in PyTorch)
  uint32_t thread;  // BlockEvent.thread of the events it labels (0 = the main thread)
};

struct LostRec {
  uint64_t t_ns;
  uint64_t count;  // events dropped since the previous LostRec
};

// EndRec.reason (minor 2; an older 16-byte EndRec reads as END_CLEAN with no message)
enum EndReason : uint32_t {
  END_CLEAN = 0,           // clean shutdown
  END_WRITER_FAILURE = 1,  // the writer could not write (disk full, permission, folder removed): the capture
                           // was cut at the last whole record; `message` names the path and the error
  END_STOPPED = 2,         // stopped by the user / the extension
};

struct EndRec {
  uint64_t t_ns;
  int32_t exit_code;  // -1 if unknown
  uint32_t reason;    // EndReason (minor 2; was `pad`, always 0)
  uint32_t message;   // string id (minor 2), 0 = none
  // minor 6: bytes of the REC_INDEX record (header included) that ends where this record begins; 0 = none
  // (Note [Capture index]). An END of 24 bytes is the file's last 32 bytes, so a reader finds the index from the end.
  uint32_t index_bytes;
};

// Note [Capture index] (minor 6): a capture of any size opens in fixture time because the writer keeps, on its own
// thread, an overview of every device as it writes the records (capture_index.h: the same code a reader runs over
// the records when the index is absent), and at a clean close writes it as one REC_INDEX just before REC_END, whose
// index_bytes says where it starts. A first view reads the header, the last 32 bytes and the index: nothing that
// grows with the file. Per device: the figures of the whole run (events, time range, peaks, end state) and
// allocated/reserved as min/max/last buckets of width bucket_ns from origin_ns (at most kIndexBuckets; the width
// doubles as the run grows, so the count never exceeds it; buckets without events are left out).
GPUMEM_CONSTEXPR uint32_t kIndexBuckets = 4096;

struct IndexRec {
  uint32_t ndevices;
  uint16_t device_bytes;  // sizeof(IndexDevice) as written (a reader steps by it: the struct may grow at the end)
  uint16_t bucket_bytes;  // sizeof(IndexBucket) as written
  uint64_t t_ns;          // when the index was written
  // then ndevices × (IndexDevice + nbuckets × IndexBucket)
};

struct IndexDevice {
  uint32_t device;
  uint32_t nbuckets;
  uint64_t events;          // events as a reader counts them (block and segment events, requested snapshots); 0 with
                            // buckets: figures only, its buckets from REC_STATS (Note [Figures after the events in
                            // the index] in capture_index.h)
  uint64_t first_event_ns;  // 0 when events == 0
  uint64_t last_event_ns;   // where the buckets end: the last event's time, or the last sample's where samples carry
                            // the figures (after MARK_EVENTS_OFF, figures only)
  uint64_t range_first_ns;  // events, markers, samples, OOMs, empty caches of the device (a reader's time range)
  uint64_t range_last_ns;
  uint64_t bucket_ns;          // width of a bucket
  uint64_t origin_ns;          // start of bucket 0
  int64_t peak_allocated;      // the highest allocated bytes (strictly greater: the first event reaching it)
  uint64_t peak_allocated_ns;  // that event's time (0: allocated never rose above 0)
  int64_t peak_reserved;
  int64_t end_allocated;  // after the last event (or the last sample, where samples carry the figures)
  int64_t end_reserved;
  uint32_t ooms;  // REC_OOM records of the device
  uint32_t pad;
};

struct IndexBucket {
  uint64_t t_ns;          // bucket start (origin_ns + k · bucket_ns)
  int64_t allocated_min;  // over the value carried in and the value after each event of the bucket
  int64_t allocated_max;
  int64_t reserved_min;
  int64_t reserved_max;
  int64_t allocated_last;  // after the bucket's last event
  int64_t reserved_last;
};

// Note [Index sections] (minor 6): after the devices, REC_INDEX carries sections, each an
// IndexSection header and `bytes` of payload, so that a capture's rank row (host, rank, device and its name, peaks,
// OOMs, the top line at the peak: `gpumem summary DIR…`, the ranks view) comes from the index alone. A reader skips
// a kind it does not know and steps by `bytes`; an index that ends after its devices (the first minor-6 writers) has
// none, and a reader that needs one opens the capture in full. A writer that writes one writes all three kinds.
enum IndexSectionKind : uint16_t {
  IDX_TOP_LINES = 1,     // IndexTopLines + n × (IndexLine + file_len bytes of UTF-8)
  IDX_DEVICE_NAMES = 2,  // IndexDeviceNames + n × (IndexDeviceName + name_len bytes of UTF-8)
  IDX_LOSSES = 3,        // IndexLosses
};

struct IndexSection {
  uint16_t kind;  // IndexSectionKind
  uint16_t pad;
  uint32_t bytes;  // payload bytes after this header
};

// The lines at the peak, as a reader's summary ranks them (its top_lines): per line (the innermost user frame of an
// allocation's stack, Note [User frames]; "<no user frame>" line 0 for none) the bytes of the allocations live at each
// device's allocated peak (the first event that reached it), summed over the devices; by bytes, then file, then line.
// The first n of them; `lines` says how many there are.
GPUMEM_CONSTEXPR uint32_t kIndexTopLines = 8;

struct IndexTopLines {
  uint32_t n;
  uint32_t lines;
};

struct IndexLine {
  uint64_t bytes;
  uint32_t line;
  uint32_t file_len;  // then the file name
};

// Every REC_DEVICE's device as a reader keeps it (the last record of a device wins).
struct IndexDeviceNames {
  uint32_t n;
  uint32_t pad;
};

struct IndexDeviceName {
  uint32_t device;
  uint32_t name_len;  // then the name
  uint64_t total_bytes;
};

// REC_LOST records written (a reader reports each as a problem) and the events they count.
struct IndexLosses {
  uint32_t records;
  uint32_t pad;
  uint64_t events;
};

#pragma pack(pop)

#ifdef __cplusplus
static_assert(sizeof(FileHeader) == 16, "FileHeader layout");
static_assert(sizeof(RecordHeader) == 8, "RecordHeader layout");
static_assert(sizeof(BlockEvent) == 48, "BlockEvent layout");
static_assert(sizeof(SegmentEvent) == 56, "SegmentEvent layout");
static_assert(sizeof(StateSegment) == 56, "StateSegment layout");
static_assert(sizeof(StateBlock) == 32, "StateBlock layout");
static_assert(sizeof(EndRec) == 24, "EndRec layout (minor 6)");
static_assert(sizeof(IndexRec) == 16, "IndexRec layout");
static_assert(sizeof(IndexDevice) == 112, "IndexDevice layout");
static_assert(sizeof(IndexBucket) == 56, "IndexBucket layout");
static_assert(sizeof(IndexSection) == 8, "IndexSection layout");
static_assert(sizeof(IndexLine) == 16, "IndexLine layout");
static_assert(sizeof(IndexDeviceName) == 16, "IndexDeviceName layout");
static_assert(sizeof(IndexLosses) == 16, "IndexLosses layout");
static_assert(sizeof(TagRec) == 32, "TagRec layout");
static_assert(sizeof(UserMetadataRec) == 16, "UserMetadataRec layout");
static_assert(sizeof(AggregatedRec) == 48, "AggregatedRec layout");
static_assert(sizeof(TimelineRec) == 16, "TimelineRec layout");
static_assert(sizeof(TimelineBucket) == 40, "TimelineBucket layout");
static_assert(sizeof(LineTotalsRec) == 8, "LineTotalsRec layout");
static_assert(sizeof(LineTotal) == 24, "LineTotal layout");
}  // namespace fmt
}  // namespace gpumem
#endif
