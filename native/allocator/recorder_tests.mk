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

$(BUILD)/recorder_asan: $(REC_SRCS) $(REC_UNIT) $(HDRS) $(REC_TESTDIR)/../check.h
	@mkdir -p $(BUILD)
	$(CXX) $(STD) -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined \
	  $(WARN) $(REC_DEFS) -Isrc -o $@ $(REC_SRCS) $(REC_UNIT) -ldl -lpthread

$(BUILD)/recorder_tsan: $(REC_SRCS) $(REC_UNIT) $(HDRS) $(REC_TESTDIR)/../check.h
	@mkdir -p $(BUILD)
	$(CXX) $(STD) -O1 -g -fsanitize=thread $(WARN) $(REC_DEFS) -Isrc -o $@ $(REC_SRCS) $(REC_UNIT) -ldl -lpthread

.PHONY: test-recorder
test-recorder: $(LIB) $(BUILD)/native_thread.so $(BUILD)/recorder_asan $(BUILD)/recorder_tsan
	@sh $(REC_TESTDIR)/run_tests.sh $(LIB) $(abspath $(BUILD))/native_thread.so \
	  $(abspath $(BUILD))/recorder_asan $(abspath $(BUILD))/recorder_tsan
