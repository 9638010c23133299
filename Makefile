# tensh: the tensor shell. `make` builds build/tensh and build/tensh.so (for
# `require "tensh"`); `make test`, `make asan`, `make bench`, `make fuzz`, `make demo`.
# Parallel by default (-j1 for one job at a time); one line per file (V=1 for
# the full commands).

# ---- settings ---------------------------------------------------------------
CC       ?= cc
NVCC     ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
CUDA     ?= $(if $(NVCC),1,0)
# machine code for the cards users own: sm_80 A100/A30, sm_86 RTX 30xx/A10/A40,
# sm_89 RTX 40xx/L4/L40, sm_90 H100/H200; the newest also as PTX, which the
# driver compiles for later cards (Blackwell). On a machine with a GPU the
# build is for the cards present (nvidia-smi's compute capability: a quarter of
# the nvcc time); `make release` (CUDA_ARCH=all) builds the list whatever the
# machine. CUDA_ARCH=86 builds one; a value with -gencode is passed as it is.
CUDA_ARCH_ALL := 80 86 89 90
GPU_ARCH := $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d . | sort -u | tr '\n' ' ')
CUDA_ARCH ?= $(or $(strip $(GPU_ARCH)),$(CUDA_ARCH_ALL))
override CUDA_ARCH := $(if $(filter all,$(CUDA_ARCH)),$(CUDA_ARCH_ALL),$(CUDA_ARCH))
# ccache, where it is installed, for the C and nvcc compiles (CCACHE= turns it off)
CCACHE   ?= $(shell command -v ccache 2>/dev/null)
OPT      ?= -O2
# Link-time optimisation: the per-op call chain (binding, op layer, allocator)
# spans files; inlined across them a 1-element op costs 4% less. It makes
# every link a whole-program compile (a one-file edit: 200 s instead of 5 s
# on a busy 2-core machine), so it is for the binaries that are measured:
# `make bench` builds them in build-lto/. LTO=-flto=auto turns it on here.
LTO      ?=
BUILD    ?= build
# where the nvcc objects go: `make bench` shares them with build/ (no LTO in them)
CUDA_BUILD ?= $(BUILD)
SAN      ?=
LUA_PKG  ?= lua5.4
V        ?= 0
INSTALL_DEPS ?= bash scripts/install-deps.sh

ifeq ($(filter 1,$(V)),)
# quiet: `CC src/core/tensor.c` in place of the command
say = @printf '  %-9s %s\n' '$(1)' '$(2)';
endif
.DEFAULT_GOAL := all
NPROC := $(shell nproc 2>/dev/null || echo 2)
MAKEFLAGS += -j$(NPROC)

# A fresh machine: every probe below must see what install-deps.sh installs,
# so none may run before it. Without Lua, make first builds this stamp (the
# install) and then, because an included makefile was remade, reads the whole
# Makefile again: the probes of that second reading decide the build.
ifeq ($(shell pkg-config --exists $(LUA_PKG) 2>/dev/null && echo y),)
ifeq ($(filter clean deps,$(MAKECMDGOALS)),)
include $(BUILD)/.deps-installed
endif
endif
$(BUILD)/.deps-installed:
	$(INSTALL_DEPS)
	@mkdir -p $(@D) && touch $@

# OpenBLAS built with OpenMP shares tensh's OpenMP threads; the pthread build
# brings a second pool whose threads spin against OpenMP's (CNN steps were
# 1.1-1.6x slower with it). Debian installs both; the default is used when the
# OpenMP one is missing.
comma     := ,
ARCH_DIR  := $(shell gcc -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)
BLAS_OMP  := $(wildcard /usr/lib/$(ARCH_DIR)/openblas-openmp/libopenblas.so)
BLAS_LIBS := $(if $(BLAS_OMP),-L/usr/lib/$(ARCH_DIR)/openblas-openmp -Wl$(comma)-rpath$(comma)/usr/lib/$(ARCH_DIR)/openblas-openmp) -lopenblas
BLAS_INC  := -I/usr/include/$(ARCH_DIR)/openblas-$(if $(BLAS_OMP),openmp,pthread)
# tensh opens it on first use (src/cpu/blas_loader.c; linked, its loading cost
# 1.5 ms of every start-up): that library, by path; BLAS_LIBS links sim_selftest
BLAS_LIB  := $(if $(BLAS_OMP),$(BLAS_OMP).0,libopenblas.so.0)

# oneDNN (Debian's libdnnl-dev) runs CPU convolution when the build finds it:
# the library PyTorch's CPU convolution uses, 2x im2col + OpenBLAS here.
# DNNL=0 builds without it (convolution composed from im2col and GEMM).
DNNL_HEADER ?= /usr/include/oneapi/dnnl/dnnl.h
DNNL      ?= $(if $(wildcard $(DNNL_HEADER)),1,0)
ifeq ($(DNNL),1)
CFLAGS   += -DTS_HAVE_DNNL
# linked at run time: src/cpu/conv_dnnl.c opens libdnnl on first use (start-up)
endif

LUA_CFLAGS := $(shell pkg-config --cflags $(LUA_PKG) 2>/dev/null)
LUA_LIBS   := $(shell pkg-config --libs $(LUA_PKG) 2>/dev/null)
CFLAGS   += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -fPIC -fopenmp -fno-math-errno -fno-trapping-math -fvect-cost-model=dynamic \
            -MMD -MP $(OPT) $(LTO) -g $(SAN) $(LUA_CFLAGS) $(shell pkg-config --cflags libcjson 2>/dev/null) -Isrc $(BLAS_INC) \
            -DTS_BLAS_LIB='"$(BLAS_LIB)"'
LDFLAGS  += $(OPT) $(LTO)
LDLIBS   += -ldl -lcjson -lreadline -lz -lm -lpthread -fopenmp $(SAN)

# ---- sources ----------------------------------------------------------------
# the core and the layers above it, one folder each (docs/design.md)
CORE_SRC  := $(wildcard $(addsuffix /*.c,src/core src/ops src/autograd src/io src/dist src/cpu src/data))
LUA_SRC   := $(wildcard src/lua/*.c)
SHELL_SRC := $(wildcard src/shell/*.c)
CUDA_SRC  := $(wildcard cuda/*.cu)
CTEST_SRC := $(wildcard tests/c/*.c)

# nvcc may be a wrapper script outside the toolkit (CI has /usr/local/bin/nvcc),
# so the toolkit root comes from nvcc itself; without the CUDA runtime
# library there, the build stays a CPU build.
ifeq ($(CUDA),1)
CUDA_HOME ?= $(realpath $(shell $(NVCC) --dryrun -c -x cu /dev/null -o /dev/null 2>&1 | sed -n 's/^\#\$$ _HERE_=//p')/..)
ifeq ($(wildcard $(CUDA_HOME)/lib64/libcudart_static.a),)
$(warning nvcc found but no libcudart_static.a under '$(CUDA_HOME)/lib64': building without CUDA)
CUDA := 0
endif
endif

# The runtime calls cuda/activity.cu counts (launches, copies, host
# synchronisations for the profiler and the sync debug mode), wrapped at link time
CUDA_WRAP := $(foreach f,cudaLaunchKernel __cudaLaunchKernel cudaStreamSynchronize cudaDeviceSynchronize \
               cudaEventSynchronize cudaMemcpy cudaMemcpyAsync cudaMemcpyPeerAsync cudaMemsetAsync \
               cublasGemmStridedBatchedEx cublasLtMatmul,-Wl,--wrap=$(f))

ifeq ($(CUDA),1)
# cuDNN: headers at build time only; libcudnn is dlopen'ed at run time (conv_cudnn.cu)
CUDNN     := $(if $(wildcard $(CUDA_HOME)/include/cudnn.h),1,0)
NVCC_DEFS := $(if $(filter 1,$(CUDNN)),-DTSC_HAVE_CUDNN)
CFLAGS    += -DTS_HAVE_CUDA
CUDA_OBJ  := $(CUDA_SRC:%.cu=$(CUDA_BUILD)/%.o)
LDLIBS    += -L$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt -lpthread -lstdc++ $(CUDA_WRAP)
SM_LIST   := $(patsubst sm_%,%,$(patsubst compute_%,%,$(CUDA_ARCH)))
SM_NEWEST := $(lastword $(shell printf '%s\n' $(SM_LIST) | sort -n))
NVCC_ARCH := $(if $(findstring -gencode,$(CUDA_ARCH)),$(CUDA_ARCH),\
               $(foreach a,$(SM_LIST),-gencode arch=compute_$(a)$(comma)code=sm_$(a)) \
               -gencode arch=compute_$(SM_NEWEST)$(comma)code=compute_$(SM_NEWEST))
NVCC_ARCH_SAID := $(if $(findstring -gencode,$(CUDA_ARCH)),$(CUDA_ARCH),$(addprefix sm_,$(SM_LIST)) + PTX compute_$(SM_NEWEST))
# --resource-usage: ptxas's registers, spills and shared memory per kernel, kept
# beside each object (.o.res) for `make gpu-report`
NVCCFLAGS := -O3 -std=c++17 $(NVCC_ARCH) --expt-relaxed-constexpr -Isrc -Icuda -Xcompiler -fPIC -MMD -MP --resource-usage \
             $(NVCC_DEFS) -DTSC_CUDA_LIB_DIR='"$(CUDA_HOME)/lib64"'
else
CUDA_OBJ  :=
endif
# The shell links libstdc++ (cudart's and the CUDA objects' two dozen C++
# symbols) statically and hidden: loading libstdc++.so and binding its
# symbols was 2.0M of the CUDA build's 14.2M start-up instructions and 38 of
# its 504 page faults. Libraries opened later (cuBLAS, cuDNN, oneDNN) load
# libstdc++.so for themselves; no C++ object crosses between them and tensh.
STDCXX_A     := $(shell $(CC) -print-file-name=libstdc++.a 2>/dev/null)
TENSH_LDLIBS := $(if $(filter /%,$(STDCXX_A)),$(patsubst -lstdc++,-Wl$(comma)-Bstatic -lstdc++ -Wl$(comma)-Bdynamic -Wl$(comma)--exclude-libs$(comma)libstdc++.a,$(LDLIBS)),$(LDLIBS))

LUA_LIB   := $(sort $(wildcard lua/tensh/*.lua lua/tensh/*/*.lua))
CORE_OBJ  := $(CORE_SRC:%.c=$(BUILD)/%.o)
LUA_OBJ   := $(LUA_SRC:%.c=$(BUILD)/%.o) $(BUILD)/gen/lua_lib.o
SHELL_OBJ := $(SHELL_SRC:%.c=$(BUILD)/%.o)
CTEST_OBJ := $(CTEST_SRC:%.c=$(BUILD)/%.o)
C_OBJ     := $(CORE_OBJ) $(LUA_SRC:%.c=$(BUILD)/%.o) $(SHELL_OBJ) $(CTEST_OBJ)

# Dependencies: each object on the headers its compiler saw it include
# (-MMD -MP writes build/x.d), and on the flags it was compiled with: a
# flags file is rewritten only when they change (DNNL=0, LTO=, OPT=...).
ifeq ($(filter clean deps,$(MAKECMDGOALS)),)
-include $(C_OBJ:.o=.d) $(CUDA_OBJ:.o=.d)
differ = $(subst $(1),,$(2))$(subst $(2),,$(1))
# $(call flags_file,FILE,VARIABLE): FILE, rewritten when VARIABLE's value
# changed. The variable goes by name (a value passed through $(call) is split
# at its commas: -gencode arch=...,code=...) and the file's text is stripped
# (read inside $(call), it kept its newline): either made every make rewrite
# the flags files and rebuild every object, CUDA ones included.
flags_file = $(shell mkdir -p $(dir $(1)))$(if $(call differ,$(strip $(file <$(1))),x$(strip $($(2)))),$(file >$(1),x$(strip $($(2)))))$(1)
$(C_OBJ): $(call flags_file,$(BUILD)/.flags-cc,CFLAGS)
$(CUDA_OBJ): $(call flags_file,$(CUDA_BUILD)/.flags-nvcc,NVCCFLAGS)
endif

include sim/sim.mk

.PHONY: all deps test asan bench fuzz demo gpt clean probe release install uninstall gpu-report
all: $(BUILD)/tensh $(BUILD)/tensh.so

# what the build found: said before the first compile and whenever the
# configuration changes (`make probe` says it again)
$(C_OBJ) $(CUDA_OBJ): | $(BUILD)/.probed
define say_probes
	@if [ -n "$(LUA_CFLAGS)$(LUA_LIBS)" ]; then echo "✓ lua5.4"; else echo "✗ lua5.4 not found: run scripts/install-deps.sh"; exit 1; fi
	@if [ "$(DNNL)" = 1 ]; then echo "✓ oneDNN: CPU convolutions through libdnnl"; else echo "✗ oneDNN: CPU convolutions use im2col + GEMM"; fi
	@if [ "$(CUDA)" = 1 ]; then echo "✓ nvcc $$($(NVCC) --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'): CUDA backend built for $(NVCC_ARCH_SAID)"; \
	 else echo "✗ nvcc: CPU-only build"; fi
	@if [ "$(CUDA)" = 1 ]; then if [ "$(CUDNN)" = 1 ]; then echo "✓ cuDNN headers: CUDA convolutions through libcudnn where it loads"; \
	 else echo "✗ cuDNN: CUDA convolutions use im2col + GEMM"; fi; fi
endef
$(BUILD)/.probed: $(BUILD)/.flags-cc $(if $(CUDA_OBJ),$(CUDA_BUILD)/.flags-nvcc)
	$(say_probes)
	@touch $@
probe:
	$(say_probes)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(call say,CC,$<)$(CCACHE) $(CC) $(CFLAGS) -c $< -o $@

# the Lua library is embedded in the binary, so tensh runs from anywhere
$(BUILD)/embed: tools/embed.c
	@mkdir -p $(dir $@)
	$(call say,CC,$<)$(CC) -O1 $(LUA_CFLAGS) -o $@ $< $(LUA_LIBS)

# docs/api.md goes in too, as the module tensh.api_doc (a Lua string), for
# help() at the prompt
$(BUILD)/gen/lua/tensh/api_doc.lua: docs/api.md
	@mkdir -p $(dir $@)
	$(call say,GEN,$@){ echo 'return [=====['; cat $<; echo ']=====]'; } >$@

# and the Jupyter kernel's Python wrapper, as tensh.jupyter_kernel_py, which
# `tensh --jupyter install` writes beside the kernelspec
$(BUILD)/gen/lua/tensh/jupyter_kernel_py.lua: lua/tensh/jupyter_kernel.py
	@mkdir -p $(dir $@)
	$(call say,GEN,$@){ echo 'return [=====['; cat $<; echo ']=====]'; } >$@

EMBEDDED := $(LUA_LIB) $(BUILD)/gen/lua/tensh/api_doc.lua $(BUILD)/gen/lua/tensh/jupyter_kernel_py.lua
$(BUILD)/gen/lua_lib.c: $(EMBEDDED) $(BUILD)/embed $(call flags_file,$(BUILD)/.lua-files,EMBEDDED)
	@mkdir -p $(dir $@)
	$(call say,EMBED,lua/tensh/*.lua docs/api.md)$(BUILD)/embed $@ $(EMBEDDED)

$(BUILD)/gen/lua_lib.o: $(BUILD)/gen/lua_lib.c
	$(call say,CC,$<)$(CC) -O1 -fPIC -c $< -o $@

# The cuBLAS forwarders stay out of the dynamic symbol table (-Wl,-E exports the
# rest for Lua modules): exported, they would interpose on libcublas's own calls
# into libcublasLt, re-entering the loader while it is still loading.
$(CUDA_BUILD)/cuda/cublas_loader.o: NVCC_EXTRA := -Xcompiler -fvisibility=hidden

# nvcc is most of a fresh build's time: say once, before it starts, what it
# builds and how to build less (the stamp is older than a changed CUDA source)
$(CUDA_BUILD)/cuda/.started: $(CUDA_SRC) $(wildcard cuda/*.h cuda/*.cuh)
	@mkdir -p $(@D)
	@echo "NVCC: the CUDA backend, $(words $(CUDA_SRC)) files in cuda/, for $(NVCC_ARCH_SAID)."
	@echo "      The longest part of the build; CUDA_ARCH=86 (one card's compute capability) builds for that"
	@echo "      card only, in about half the time; CUDA=0 builds without CUDA."
	@touch $@
$(CUDA_OBJ): | $(CUDA_BUILD)/cuda/.started

$(CUDA_BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(call say,NVCC,$<)$(CCACHE) $(NVCC) $(NVCCFLAGS) $(NVCC_EXTRA) -c $< -o $@ 2>$@.res; rc=$$?; \
	  grep -vE '^(ptxas info|    [0-9]+ bytes stack frame)' $@.res >&2; exit $$rc

# the CUDA objects first, so the longest jobs start first
$(BUILD)/tensh: $(CUDA_OBJ) $(CORE_OBJ) $(LUA_OBJ) $(SHELL_OBJ)
	$(call say,LINK,$@)$(CC) $(LDFLAGS) -o $@ $^ $(LUA_LIBS) $(TENSH_LDLIBS) -Wl,-E

# the Lua module: lua5.4 itself provides the Lua API symbols
$(BUILD)/tensh.so: $(CUDA_OBJ) $(CORE_OBJ) $(LUA_OBJ)
	$(call say,LINK,$@)$(CC) $(LDFLAGS) -shared -o $@ $^ $(LDLIBS)

$(BUILD)/test_c: $(CUDA_OBJ) $(CTEST_OBJ) $(CORE_OBJ)
	$(call say,LINK,$@)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

deps:
	$(INSTALL_DEPS)

# every kernel's registers, spills, static shared memory and theoretical
# occupancy per architecture; fails on a spill or a broken __launch_bounds__ promise
gpu-report: $(CUDA_OBJ)
	@lua5.4 scripts/gpu_report.lua $(CUDA_BUILD)

# with the simulated device where it builds (sim/sim.mk): the CUDA suite runs there too
test: all $(BUILD)/test_c $(if $(filter 1,$(SIM)),sim)
	@bash tests/run.sh $(BUILD) $(if $(filter 1,$(SIM)),$(SIM_BUILD))

# UB halts (no silent "runtime error" lines that still exit 0); a too-large
# malloc returns NULL as in a normal build (tensh reports it); leaks are
# reported except the third-party ones listed in tests/lsan.supp. No
# __tls_get_addr tracking: GCC 12's LeakSanitizer misreads glibc 2.36's
# dynamic TLS of a simulator thread after im2col convolutions, and its
# tracer crashes at exit; static TLS is still scanned.
ASAN_ENV := ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1:check_initialization_order=1:strict_init_order=1:intercept_tls_get_addr=0 \
            LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0 \
            UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# The simulated device's pass runs under them too (build-asan-sim): the
# simulator and the C code are instrumented; cuda/*.cu keep the simulator's
# own access checks (GCC cannot add ASan to its ThreadSanitizer hooks).
asan:
	$(ASAN_ENV) $(MAKE) BUILD=build-asan CUDA=0 SIM_BUILD=build-asan-sim OPT=-O1 LTO= \
	  SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" test

# the measured binaries: with LTO, in their own directory
# make bench [PEERS=scripts/bench/twins] [BASELINE=old.jsonl] [THRESHOLD=5%]
# [BENCH_THREADS=1] [BENCH_ROUNDS=3] (scripts/bench/run.sh lists the rest): tensh bench over
# scripts/bench/ and the PyTorch twins in PEERS (scripts/bench/twins), ratios per case; with a
# BASELINE, the runner's verdict is the exit status
BENCH_BUILD ?= build-lto
bench:
	$(MAKE) BUILD=$(BENCH_BUILD) CUDA_BUILD=$(BUILD) LTO=-flto=auto all
	@PEERS='$(PEERS)' BASELINE='$(BASELINE)' THRESHOLD='$(THRESHOLD)' bash scripts/bench/run.sh $(BENCH_BUILD)

# the API fuzzer's long run (make test has a one-minute one on each build):
# FUZZ_SECONDS=N FUZZ_SEED=N; FUZZ_MESSAGES=1 lists the unclear messages;
# on the simulated device where it builds (tensors on the CPU, on cuda and
# both in one call; FUZZ_DEVICE=cpu|cuda|both), else on $(BUILD)
FUZZ_SECONDS ?= 1800
FUZZ_BUILD ?= $(if $(filter 1,$(SIM)),$(SIM_BUILD),$(BUILD))
fuzz: all $(if $(filter 1,$(SIM)),sim)
	FUZZ_HUGE=1 bash tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_SEED)

# on a fresh Debian machine: dependencies and Debian's Fashion-MNIST first,
# then a build in a sub-make that sees them, then training on the best device
# (DEMO_ARGS=... passes options, e.g. DEMO_ARGS="--model cnn")
# Without a GPU the demo runs a CPU-only build in $(BUILD)-cpu/ (no nvcc on its
# path: minutes instead of a quarter of an hour); `make` and `make test`
# still compile the CUDA backend in build/.
DEMO_GPU := $(if $(strip $(GPU_ARCH)),1,0)
DEMO_BUILD := $(if $(filter 1,$(DEMO_GPU)),$(BUILD),$(BUILD)-cpu)
demo:
	$(INSTALL_DEPS) dataset-fashion-mnist
	$(if $(filter 1,$(DEMO_GPU)),$(MAKE) all,$(MAKE) BUILD=$(DEMO_BUILD) CUDA=0 all)
	$(DEMO_BUILD)/tensh scripts/train_fashion_mnist.lua $(DEMO_ARGS)

# a character-level GPT (scripts/train_gpt.lua, models.gpt) trained on the license
# texts every Debian system has (/usr/share/common-licenses), small enough for a few
# minutes on a CPU, then sampled; GPT_ARGS=... passes options (e.g. GPT_ARGS="--steps 5000")
gpt:
	$(if $(filter 1,$(DEMO_GPU)),$(MAKE) all,$(MAKE) BUILD=$(DEMO_BUILD) CUDA=0 all)
	$(DEMO_BUILD)/tensh scripts/train_gpt.lua $(GPT_ARGS)

# the multi-architecture binary with PTX, whatever GPU this machine has
release:
	$(MAKE) CUDA_ARCH=all all

# GNU conventions: PREFIX, DESTDIR; the Lua module where lua5.4 looks for that
# prefix (PREFIX/lib/lua/5.4), the man page, docs and bash completion.
# The Lua library is compiled into both binaries, so no .lua files install.
PREFIX  ?= /usr/local
prefix  ?= $(PREFIX)
bindir  ?= $(prefix)/bin
mandir  ?= $(prefix)/share/man
docdir  ?= $(prefix)/share/doc/tensh
luacdir ?= $(prefix)/lib/lua/5.4
bashcompdir ?= $(prefix)/share/bash-completion/completions
INSTALLED := $(bindir)/tensh $(luacdir)/tensh.so $(mandir)/man1/tensh.1 $(bashcompdir)/tensh \
             $(addprefix $(docdir)/,README.md api.md porting.md design.md data_parallel.md)
install: all
	install -d $(DESTDIR)$(bindir) $(DESTDIR)$(luacdir) $(DESTDIR)$(mandir)/man1 $(DESTDIR)$(docdir) $(DESTDIR)$(bashcompdir)
	install -m 755 $(BUILD)/tensh $(DESTDIR)$(bindir)/tensh
	install -m 644 $(BUILD)/tensh.so $(DESTDIR)$(luacdir)/tensh.so
	install -m 644 docs/man/tensh.1 $(DESTDIR)$(mandir)/man1/tensh.1
	install -m 644 scripts/completion/tensh.bash $(DESTDIR)$(bashcompdir)/tensh
	install -m 644 README.md docs/api.md docs/porting.md docs/design.md docs/data_parallel.md $(DESTDIR)$(docdir)/
uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	-rmdir $(DESTDIR)$(docdir) 2>/dev/null

clean:
	rm -rf build build-cpu build-asan build-sim build-lto
