# QRL build. `make` builds build/qrl, build/libqrl.a and build/libqrl.so; `make install` installs
# them with the header, qrl.pc, the stdlib and the docs (PREFIX, DESTDIR; `make uninstall`).
# `make test` installs missing Debian packages, builds and runs the test suite.
# `make test-asan` runs the same suite under AddressSanitizer + UBSan.
# `make fuzz` runs the front-end fuzzer's long campaign under both (tests/fuzz/);
# `make fuzz-models` the model fuzzer's.
# `make example` runs the bundled Fashion-MNIST example.

B        ?= build
CC       ?= gcc
OPT      ?= -O2
SAN      ?=
CFLAGS   ?= -std=c11 -Wall -Wextra -Werror -Wno-format-truncation $(OPT) -g -fPIC -D_DEFAULT_SOURCE $(SAN)
# The kernels' loops (GEMMs, im2col, the quantizer's fake quantization and
# ranges, the gram's linear algebra, rank = grad's backward loops) vectorize only under the dynamic cost
# model: -O2's "very cheap" one left the AVX-512 clones scalar.
KERNEL_OBJ = $(B)/obj/runtime/ops/quant.o $(B)/obj/runtime/ops/conv.o $(B)/obj/runtime/ops/nhwc.o $(B)/obj/runtime/ops/dense.o \
             $(B)/obj/runtime/ops/elementwise.o $(B)/obj/quantizer/quantize.o $(B)/obj/runtime/recipe.o \
             $(B)/obj/runtime/gram.o $(B)/obj/quantizer/gridconv.o $(B)/obj/quantizer/qmeasure.o \
             $(B)/obj/quantizer/vjp.o $(B)/obj/runtime/ops/wino_nchw.o
$(KERNEL_OBJ): CFLAGS += -fvect-cost-model=dynamic
LDFLAGS  ?= $(SAN)
GCCJIT_DIR ?= /usr/lib/gcc/x86_64-linux-gnu/12
LIBS      = -lprotobuf-c -L$(GCCJIT_DIR) -lgccjit -ldl -lm -lpthread
PYTHON   ?= /usr/bin/python3
ONNX_PROTO ?= /usr/include/onnx/onnx.proto
VERSION   = 0.1.0
# The shared library's ABI version: libqrl.so.$(VERSION) with SONAME libqrl.so.$(SOMAJOR).
SOMAJOR   = $(firstword $(subst ., ,$(VERSION)))

GEN      = $(B)/gen
CPPFLAGS = -DQRL_VERSION='"$(VERSION)"' -DQRL_SOURCE_STDLIB='"$(CURDIR)/stdlib"' -MMD -MP

# The layers see only the headers below them (quantizer/README.md): each folder's
# objects get their own include paths, so an include across the layering does not
# build (tools/check-layers.sh, run by `make check`, proves it).
#   runtime/   ->  include/ (it implements the model calls of qrl.h)
#   quantizer/ ->  runtime/
#   compiler/  ->  runtime/ (the module interface, recipe.h), include/, grammar/, lang/
#   api/       ->  include/ (the calls it implements), compiler/, quantizer/, runtime/
#   cli/       ->  include/ only: every command is calls of the public API
INC_lang      =
INC_grammar   = -I$(GEN)
INC_runtime   = -Iinclude -Iruntime -I$(GEN)
INC_quantizer = -Iruntime -Iquantizer
INC_compiler  = -Iinclude -Iruntime -I$(GCCJIT_DIR)/include
INC_api       = -Iinclude -Iruntime -Iquantizer -Icompiler
INC_cli       = -Iinclude
INC_tests     = -Iinclude -Iruntime -Iquantizer -I$(GEN) -I$(GCCJIT_DIR)/include
LAYERS        = lang grammar runtime quantizer compiler api cli
# The include paths of source file $(1)'s folder.
layer_inc = $(INC_$(firstword $(subst /, ,$(1))))

RUNTIME_SRC = $(wildcard runtime/*.c runtime/ops/*.c quantizer/*.c api/*.c)
FRONT_SRC   = $(wildcard lang/*.c grammar/*.c compiler/*.c)
GEN_FRONT   = $(B)/obj/gen/lexer.o $(B)/obj/gen/grammar/qrl.o
LIB_OBJ     = $(RUNTIME_SRC:%.c=$(B)/obj/%.o) $(FRONT_SRC:%.c=$(B)/obj/%.o) $(B)/obj/gen/onnx.pb-c.o $(GEN_FRONT)
GEN_HDRS    = $(GEN)/onnx.pb-c.h $(GEN)/grammar/qrl.h
LEMPAR     ?= /usr/share/lemon/lempar.c
CLI_OBJ     = $(patsubst %.c,$(B)/obj/%.o,$(wildcard cli/*.c))

TEST_SRC  = $(wildcard tests/unit/test_*.c tests/conformance/test_*.c tests/e2e/test_*.c)
TEST_BIN  = $(patsubst tests/%.c,$(B)/tests/%,$(TEST_SRC))
TEST_SUPPORT = $(patsubst %.c,$(B)/obj/%.o,$(wildcard tests/support/*.c))

# The MPI transport (mpi/, runtime/dist.h): built into $(B)/qrl-mpi whenever mpicc exists. qrl
# started by mpirun runs it (cli/main.c), so libqrl and qrl itself never depend on MPI.
MPICC    ?= $(shell command -v mpicc 2>/dev/null)
INC_mpi   = -Iruntime
MPI_BIN   = $(if $(MPICC),$(B)/qrl-mpi)
$(B)/obj/mpi/%.o: CC = $(MPICC)

all: $(B)/qrl $(B)/libqrl.a $(B)/libqrl.so $(B)/libqrl.so.$(SOMAJOR) $(MPI_BIN)

$(GEN)/onnx.pb-c.c $(GEN)/onnx.pb-c.h &: $(ONNX_PROTO)
	@mkdir -p $(GEN)
	protoc-c -I$(dir $(ONNX_PROTO)) --c_out=$(GEN) $(ONNX_PROTO)

# Generated code gets its own flags: protoc-c output is not -Wextra clean.
$(B)/obj/gen/onnx.pb-c.o: $(GEN)/onnx.pb-c.c $(GEN)/onnx.pb-c.h
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(OPT) -g -fPIC $(SAN) -I$(GEN) -c $< -o $@

# The lexer (re2c) and the parser (Lemon), generated into $(GEN).
$(GEN)/lexer.c: lang/lexer.re lang/token.h
	@mkdir -p $(GEN)
	re2c -W -Werror --no-generation-date --no-version -o $@ $<

$(GEN)/grammar/qrl.c $(GEN)/grammar/qrl.h &: grammar/qrl.y
	@mkdir -p $(GEN)/grammar
	lemon -q -T$(LEMPAR) -d$(GEN)/grammar grammar/qrl.y
	@touch $(GEN)/grammar/qrl.c $(GEN)/grammar/qrl.h # lemon keeps an unchanged header's old time

$(B)/obj/gen/lexer.o: $(GEN)/lexer.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(INC_lang) -Ilang -std=c11 -Wall -Wextra -Werror $(OPT) -g -fPIC -D_DEFAULT_SOURCE $(SAN) -c $< -o $@

# Lemon's template is not -Wextra clean.
$(B)/obj/gen/grammar/qrl.o: $(GEN)/grammar/qrl.c $(GEN)/grammar/qrl.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(INC_grammar) -Igrammar -std=c11 $(OPT) -g -fPIC -D_DEFAULT_SOURCE $(SAN) -c $< -o $@

# The compiled-module cache key names the code generator that built a module:
# the hash of every source that shapes the code it generates: the whole front
# end (lang/, grammar/: what a recipe parses to; compiler/: the checker and its
# types, generics, which items a module holds, the lowering, the cache) but the
# convolution kernels' own generator (iconv_jit, keyed below), and the module
# interface, runtime/recipe.h with the runtime headers it includes (tensor.h's
# QR_MAX_DIMS, dtype.h's element types)
# (tests/unit/test_cache.c jit_id_hashes_code_generator_sources checks it).
JIT_RUNTIME_H := runtime/recipe.h runtime/graph.h runtime/arena.h runtime/status.h runtime/tensor.h runtime/dtype.h
JIT_SRC := $(sort $(filter-out compiler/iconv_jit.%,$(wildcard compiler/*.c compiler/*.h)) \
                  $(wildcard lang/*.c lang/*.h lang/*.re grammar/*.c grammar/*.h grammar/*.y) $(JIT_RUNTIME_H))
JIT_ID := $(shell cat $(JIT_SRC) 2>/dev/null | sha256sum | cut -c1-16)
$(B)/obj/compiler/compile.o: CPPFLAGS += -DQRL_JIT_ID='"$(JIT_ID)"'
$(B)/obj/compiler/compile.o: $(JIT_SRC)
.PHONY: jit-id
jit-id:
	@echo $(JIT_ID)

# The shape-specialized conv kernels (compiler/iconv_jit.c) are cached by the same means under a
# key naming their own generator.
ICONV_JIT_ID := $(shell cat compiler/iconv_jit.c compiler/iconv_jit.h 2>/dev/null | sha256sum | cut -c1-16)
$(B)/obj/compiler/iconv_jit.o: CPPFLAGS += -DQC_ICONV_JIT_ID='"$(ICONV_JIT_ID)"'

$(B)/obj/%.o: %.c | $(GEN_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(call layer_inc,$<) $(CFLAGS) -c $< -o $@

$(B)/libqrl.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The shared library exports only the qrl_* calls (runtime/libqrl.map); build/libqrl.so and
# build/libqrl.so.$(SOMAJOR) are links to it, as installed.
$(B)/libqrl.so.$(VERSION): $(LIB_OBJ) runtime/libqrl.map
	$(CC) -shared $(LDFLAGS) -Wl,-soname,libqrl.so.$(SOMAJOR) -Wl,--version-script,runtime/libqrl.map -o $@ \
		$(LIB_OBJ) $(LIBS)

$(B)/libqrl.so.$(SOMAJOR) $(B)/libqrl.so: $(B)/libqrl.so.$(VERSION)
	ln -sfn libqrl.so.$(VERSION) $@

$(B)/qrl: $(CLI_OBJ) $(B)/libqrl.a
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(B)/libqrl.a $(LIBS)

$(B)/qrl-mpi: $(CLI_OBJ) $(B)/obj/mpi/dist_mpi.o $(B)/libqrl.a
	$(MPICC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(B)/obj/mpi/dist_mpi.o $(B)/libqrl.a $(LIBS)

$(B)/tests/%: tests/%.c $(B)/libqrl.a $(TEST_SUPPORT) | $(GEN_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(INC_tests) -Itests/support $(CFLAGS) -o $@ $< $(TEST_SUPPORT) $(B)/libqrl.a -lcriterion $(LIBS) $(LDFLAGS)

tests: $(TEST_BIN) $(B)/qrl $(MPI_BIN) $(B)/fuzz_models $(B)/libqrl.so $(B)/libqrl.so.$(SOMAJOR)

# The front-end fuzzer (tests/fuzz/, generator in tests/support/fuzzgen.c, shared with
# tests/unit/test_fuzz.c). `make fuzz` runs a long campaign under ASan + UBSan
# (FUZZ_N inputs; one compiled in every FUZZ_COMPILE_EVERY).
FUZZ_OBJ = $(B)/obj/tests/support/fuzzgen.o
$(B)/fuzz_front: tests/fuzz/fuzz_front.c $(FUZZ_OBJ) $(B)/libqrl.a | $(GEN_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(INC_tests) -Itests/support $(CFLAGS) -o $@ $< $(FUZZ_OBJ) $(B)/libqrl.a $(LIBS) $(LDFLAGS)

FUZZ_N ?= 200000
FUZZ_COMPILE_EVERY ?= 500
fuzz: deps
	$(MAKE) B=build/asan OPT=-O1 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" build/asan/fuzz_front
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0 build/asan/fuzz_front -n $(FUZZ_N) \
		-c $(FUZZ_COMPILE_EVERY) stdlib/*.qrl tests/golden/*.qrl tests/diag/*.qrl examples/recipes/*.qrl \
		$(wildcard tests/fuzz/regress/*.qrl)

# The model fuzzer (tests/fuzz/fuzz_models.c): mutants of real models through import,
# passes and the executor. `make fuzz-models` runs FUZZ_MODELS_N of them under ASan +
# UBSan; tests/unit/test_fuzz_models.c runs a short campaign in `make test`. Seeds: the
# bundled model, the generated test models, ONNX's own operator tests, and every
# mutant that ever crashed (tests/fuzz/models/). Crashing mutants go to $(B)/fuzz-models-crashes.
$(B)/fuzz_models: tests/fuzz/fuzz_models.c $(B)/libqrl.a | $(GEN_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(INC_tests) $(CFLAGS) -o $@ $< $(B)/libqrl.a $(LIBS) $(LDFLAGS)

FUZZ_MODELS_N ?= 100000
FUZZ_MODELS_SEED ?= 1
FUZZ_SEEDS = build/asan/fuzz-seeds
fuzz-models: deps
	$(MAKE) B=build/asan OPT=-O1 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" build/asan/fuzz_models
	@mkdir -p $(FUZZ_SEEDS)
	@test -f $(FUZZ_SEEDS)/zoo/zoo.onnx || $(PYTHON) tools/make_zoo_model.py $(FUZZ_SEEDS)/zoo > /dev/null
	@test -f $(FUZZ_SEEDS)/bad/good.onnx || $(PYTHON) tools/make_bad_models.py $(FUZZ_SEEDS)/bad > /dev/null
	@test -f $(FUZZ_SEEDS)/ops/cases.tsv || $(PYTHON) tools/make_op_models.py $(FUZZ_SEEDS)/ops > /dev/null
	ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0 \
		build/asan/fuzz_models -n $(FUZZ_MODELS_N) -s $(FUZZ_MODELS_SEED) -o build/asan/fuzz-models-crashes \
		examples/fmnist/fmnist_cnn.onnx $$(find $(FUZZ_SEEDS) -name '*.onnx' | sort) \
		$(wildcard tests/fuzz/models/*.onnx) $(wildcard /usr/share/libonnx-testdata/data/node/*/model.onnx)

# `make install` / `make uninstall` (PREFIX, DESTDIR as usual): the qrl command, libqrl.so (SONAME
# libqrl.so.$(SOMAJOR)) and libqrl.a, include/qrl.h, qrl.pc, the stdlib and recipes under
# $(DATADIR)/qrl (where the library and the command find the stdlib, compiler/unit.h), the man
# page and the docs with the C example. Nothing is rebuilt for it: the paths are not compiled in.
PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
DATADIR    ?= $(PREFIX)/share
MANDIR     ?= $(DATADIR)/man
DOCDIR     ?= $(DATADIR)/doc/qrl
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
INSTALL    ?= install
# What a static link needs beyond libprotobuf-c (qrl.pc's Requires.private): libgccjit by its
# SONAME, since its unversioned link is only in GCC's private folder ($(GCCJIT_DIR)).
PC_LIBS_PRIVATE = -Wl,-Bdynamic -l:libgccjit.so.0 -ldl -lm -lpthread
# A path in qrl.pc, relative to ${prefix} when under it (pkg-config --define-variable=prefix=... moves them all).
pc_path = $(patsubst $(PREFIX)/%,$${prefix}/%,$(1))

INSTALL_STDLIB  = $(wildcard stdlib/*.qrl) stdlib/README.md
INSTALL_RECIPES = $(wildcard recipes/*.qrl) recipes/README.md
INSTALL_DOCS    = README.md docs/language.md docs/quantizer.md docs/runtime.md
INSTALL_EXAMPLE = $(wildcard examples/c/*)
# Everything installed, for uninstall (folders QRL owns are removed when left empty).
INSTALLED = $(BINDIR)/qrl $(if $(MPI_BIN),$(BINDIR)/qrl-mpi) $(LIBDIR)/libqrl.so.$(VERSION) $(LIBDIR)/libqrl.so.$(SOMAJOR) $(LIBDIR)/libqrl.so \
            $(LIBDIR)/libqrl.a $(INCLUDEDIR)/qrl.h $(PKGCONFIGDIR)/qrl.pc $(MANDIR)/man1/qrl.1 \
            $(addprefix $(DATADIR)/qrl/,$(INSTALL_STDLIB) $(INSTALL_RECIPES)) \
            $(addprefix $(DOCDIR)/,$(notdir $(INSTALL_DOCS))) $(addprefix $(DOCDIR)/,$(INSTALL_EXAMPLE))
INSTALLED_DIRS = $(DOCDIR)/examples/c $(DOCDIR)/examples $(DOCDIR) $(DATADIR)/qrl/stdlib $(DATADIR)/qrl/recipes $(DATADIR)/qrl

install: all
	$(INSTALL) -d '$(DESTDIR)$(BINDIR)' '$(DESTDIR)$(LIBDIR)' '$(DESTDIR)$(INCLUDEDIR)' '$(DESTDIR)$(PKGCONFIGDIR)' \
		'$(DESTDIR)$(MANDIR)/man1' '$(DESTDIR)$(DATADIR)/qrl/stdlib' '$(DESTDIR)$(DATADIR)/qrl/recipes' \
		'$(DESTDIR)$(DOCDIR)/examples/c'
	$(INSTALL) -m 755 $(B)/qrl '$(DESTDIR)$(BINDIR)/qrl'
	$(if $(MPI_BIN),$(INSTALL) -m 755 $(MPI_BIN) '$(DESTDIR)$(BINDIR)/qrl-mpi') # mpirun's qrl runs it from beside itself
	$(INSTALL) -m 755 $(B)/libqrl.so.$(VERSION) '$(DESTDIR)$(LIBDIR)/libqrl.so.$(VERSION)'
	ln -sfn libqrl.so.$(VERSION) '$(DESTDIR)$(LIBDIR)/libqrl.so.$(SOMAJOR)'
	ln -sfn libqrl.so.$(SOMAJOR) '$(DESTDIR)$(LIBDIR)/libqrl.so'
	$(INSTALL) -m 644 $(B)/libqrl.a '$(DESTDIR)$(LIBDIR)/libqrl.a'
	$(INSTALL) -m 644 include/qrl.h '$(DESTDIR)$(INCLUDEDIR)/qrl.h'
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(call pc_path,$(LIBDIR))|' \
	    -e 's|@INCLUDEDIR@|$(call pc_path,$(INCLUDEDIR))|' -e 's|@DATADIR@|$(call pc_path,$(DATADIR))|' \
	    -e 's|@VERSION@|$(VERSION)|' -e 's|@LIBS_PRIVATE@|$(PC_LIBS_PRIVATE)|' tools/qrl.pc.in \
	    > '$(DESTDIR)$(PKGCONFIGDIR)/qrl.pc'
	chmod 644 '$(DESTDIR)$(PKGCONFIGDIR)/qrl.pc'
	$(INSTALL) -m 644 docs/qrl.1 '$(DESTDIR)$(MANDIR)/man1/qrl.1'
	$(INSTALL) -m 644 $(INSTALL_STDLIB) '$(DESTDIR)$(DATADIR)/qrl/stdlib/'
	$(INSTALL) -m 644 $(INSTALL_RECIPES) '$(DESTDIR)$(DATADIR)/qrl/recipes/'
	$(INSTALL) -m 644 $(INSTALL_DOCS) '$(DESTDIR)$(DOCDIR)/'
	$(if $(INSTALL_EXAMPLE),$(INSTALL) -m 644 $(INSTALL_EXAMPLE) '$(DESTDIR)$(DOCDIR)/examples/c/')

uninstall:
	rm -f $(foreach f,$(INSTALLED),'$(DESTDIR)$(f)')
	-rmdir $(foreach d,$(INSTALLED_DIRS),'$(DESTDIR)$(d)') 2>/dev/null || true

deps:
	@sh tools/install-deps.sh

data: deps
	@test -f $(B)/data/test_images.npy || $(PYTHON) tools/fmnist_data.py $(B)/data

# ONNX Runtime for node (npm), the peer runtime of the export tests and benchmarks.
ORT_DIR = $(B)/npm
ort: deps
	@test -d $(ORT_DIR)/node_modules/onnxruntime-node || \
		ONNXRUNTIME_NODE_INSTALL=skip npm install --prefix $(ORT_DIR) --no-audit --no-fund --silent onnxruntime-node

# The layering is enforced by the include paths above; this proves they refuse what they must.
layers: | $(GEN_HDRS)
	@CC='$(CC)' $(foreach l,$(LAYERS),INC_$(l)='$(INC_$(l))') sh tools/check-layers.sh $(B)

# The suite: every Criterion binary, TEST_JOBS at a time (tools/run-tests.sh, docs/testing.md);
# the e2e tests find the qrl binary through QRL_BIN.
TEST_JOBS ?= 2
check: tests data ort layers
	@TEST_JOBS='$(TEST_JOBS)' bash tools/run-tests.sh $(B) $(TEST_BIN)

test: deps
	$(MAKE) check

test-asan: deps
	QRL_TEST_QUICK=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0 $(MAKE) B=build/asan OPT=-O1 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" check

example: deps
	$(MAKE) all data
	$(B)/qrl quantize examples/fmnist/fmnist_cnn.onnx --recipe recipes/int8.qrl \
		--calib $(B)/data/calib_images.npy -o $(B)/fmnist_int8.onnx --qparams $(B)/fmnist_int8.json \
		--report $(B)/fmnist_int8_report.html
	$(B)/qrl eval examples/fmnist/fmnist_cnn.onnx --data $(B)/data/test_images.npy --labels $(B)/data/test_labels.npy \
		--recipe recipes/int8.qrl --calib $(B)/data/calib_images.npy

# Benchmarks print measurements and ratios; they never fail on speed. bench/run.sh: QRL against
# ONNX Runtime and PyTorch on four CNNs and two transformers, the table of ratios and bench/results.json.
bench: all data ort
	@sh bench/compile.sh $(B)
	@sh bench/run.sh $(B)

# QRL-H's transformer rows of bench/run.sh alone (BERT-layout encoder, GPT-layout decoder).
bench-transformers: all ort
	@sh bench/run.sh $(B) 1.0 bert gpt

clean:
	rm -rf build

.PHONY: all install uninstall tests deps data check layers test test-asan example clean bench bench-transformers fuzz fuzz-models ort
.DELETE_ON_ERROR:
.SECONDARY: $(TEST_SUPPORT)

-include $(shell find $(B)/obj $(B)/tests -name '*.d' 2>/dev/null) $(wildcard $(B)/*.d)
