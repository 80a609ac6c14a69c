## recorder_tests.mk — the recorder's tests (included by the Makefile; `make test-recorder`).
##   C++ unit tests of the writer, JSON, pickle emitter and control server against a fake core,
##   under ASan+UBSan and under TSan; then Python-driven tests of the real .so (sim backend):
##   stacks, snapshot pickles vs PyTorch 2.11 fixtures, control socket, writer guarantees.
REC_TESTDIR := $(ROOT)/test/native/recorder
REC_UNIT := $(REC_TESTDIR)/recorder_unit.cc $(REC_TESTDIR)/fake_core.cc
REC_DEFS := -DGPUMEM_FIXTURES='"$(ROOT)/test/fixtures/pytorch-snapshots"'

$(BUILD)/native_thread.so: $(REC_TESTDIR)/native_thread.c
	@mkdir -p $(BUILD)
	$(CC) -O1 -shared -fPIC -pthread -o $@ $<

# The recorder's sources reuse the per-file sanitizer objects of `make test` (same flags), so `make -j`
# builds each file once per sanitizer, in parallel; only the two test files need the fixtures path.
REC_ASAN_OBJS := $(patsubst %.cc,$(BUILD)/asan/%.o,$(notdir $(REC_SRCS) $(REC_CORE))) \
                 $(BUILD)/asan-rec/recorder_unit.o $(BUILD)/asan-rec/fake_core.o
REC_TSAN_OBJS := $(patsubst %.cc,$(BUILD)/tsan/%.o,$(notdir $(REC_SRCS) $(REC_CORE))) \
                 $(BUILD)/tsan-rec/recorder_unit.o $(BUILD)/tsan-rec/fake_core.o
$(BUILD)/asan-rec/%.o: $(REC_TESTDIR)/%.cc $(HDRS) $(REC_TESTDIR)/../check.h
	@mkdir -p $(dir $@)
	$(CXX) $(STD) $(ASAN) $(WARN) $(REC_DEFS) -Isrc -c -o $@ $<
$(BUILD)/tsan-rec/%.o: $(REC_TESTDIR)/%.cc $(HDRS) $(REC_TESTDIR)/../check.h
	@mkdir -p $(dir $@)
	$(CXX) $(STD) $(TSAN) $(WARN) $(REC_DEFS) -Isrc -c -o $@ $<

$(BUILD)/recorder_asan: $(REC_ASAN_OBJS)
	$(CXX) $(ASAN) -o $@ $^ -ldl -lpthread

$(BUILD)/recorder_tsan: $(REC_TSAN_OBJS)
	$(CXX) $(TSAN) -o $@ $^ -ldl -lpthread

.PHONY: test-recorder
test-recorder: $(LIB) $(BUILD)/native_thread.so $(BUILD)/recorder_asan $(BUILD)/recorder_tsan
	@sh $(REC_TESTDIR)/run_tests.sh $(LIB) $(abspath $(BUILD))/native_thread.so \
	  $(abspath $(BUILD))/recorder_asan $(abspath $(BUILD))/recorder_tsan
