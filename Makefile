# tensh: the tensor shell. `make` builds build/tensh and build/tensh.so (for
# `require "tensh"`); `make test`, `make asan`, `make bench`, `make fuzz`, `make demo`.

# ---- settings ---------------------------------------------------------------
CC       ?= cc
NVCC     ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
CUDA     ?= $(if $(NVCC),1,0)
CUDA_ARCH ?= -gencode arch=compute_90,code=sm_90
OPT      ?= -O2
# link-time optimisation: the per-op call chain (binding, op layer, allocator)
# spans files; inlined across them a 1-element op costs 4% less
LTO      ?= -flto=auto
BUILD    ?= build
SAN      ?=
LUA_PKG  ?= lua5.4

# OpenBLAS built with OpenMP shares tensh's OpenMP threads; the pthread build
# brings a second pool whose threads spin against OpenMP's (CNN steps were
# 1.1-1.6x slower with it). Debian installs both; the default is used when the
# OpenMP one is missing.
comma     := ,
ARCH_DIR  := $(shell gcc -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)
BLAS_OMP  := $(wildcard /usr/lib/$(ARCH_DIR)/openblas-openmp/libopenblas.so)
BLAS_LIBS := $(if $(BLAS_OMP),-L/usr/lib/$(ARCH_DIR)/openblas-openmp -Wl$(comma)-rpath$(comma)/usr/lib/$(ARCH_DIR)/openblas-openmp) -lopenblas
BLAS_INC  := -I/usr/include/$(ARCH_DIR)/openblas-$(if $(BLAS_OMP),openmp,pthread)

# oneDNN (Debian's libdnnl-dev) runs CPU convolution when the build finds it:
# the library PyTorch's CPU convolution uses, 2x im2col + OpenBLAS here.
# DNNL=0 builds without it (convolution composed from im2col and GEMM).
DNNL      ?= $(if $(wildcard /usr/include/oneapi/dnnl/dnnl.h),1,0)
ifeq ($(DNNL),1)
CFLAGS   += -DTS_HAVE_DNNL
LDLIBS   += -ldnnl
endif

LUA_CFLAGS := $(shell pkg-config --cflags $(LUA_PKG) 2>/dev/null)
LUA_LIBS   := $(shell pkg-config --libs $(LUA_PKG) 2>/dev/null)
CFLAGS   += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -fPIC -fopenmp -fno-math-errno -fno-trapping-math -fvect-cost-model=dynamic \
            $(OPT) $(LTO) -g $(SAN) $(LUA_CFLAGS) $(shell pkg-config --cflags libcjson 2>/dev/null) -Isrc $(BLAS_INC)
LDFLAGS  += $(OPT) $(LTO)
LDLIBS   += $(BLAS_LIBS) -lcjson -lreadline -lz -lm -lpthread -fopenmp $(SAN)

# ---- sources ----------------------------------------------------------------
CORE_SRC  := $(wildcard src/*.c src/cpu/*.c src/data/*.c)
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

ifeq ($(CUDA),1)
# cuDNN: headers at build time only; libcudnn is dlopen'ed at run time (conv_cudnn.cu)
CUDNN     := $(if $(wildcard $(CUDA_HOME)/include/cudnn.h),1,0)
NVCC_DEFS := $(if $(filter 1,$(CUDNN)),-DTSC_HAVE_CUDNN)
CFLAGS    += -DTS_HAVE_CUDA
CUDA_OBJ  := $(CUDA_SRC:%.cu=$(BUILD)/%.o)
LDLIBS    += -L$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt -lpthread -lstdc++
else
CUDA_OBJ  :=
endif

LUA_LIB   := $(sort $(wildcard lua/tensh/*.lua lua/tensh/*/*.lua))
CORE_OBJ  := $(CORE_SRC:%.c=$(BUILD)/%.o)
LUA_OBJ   := $(LUA_SRC:%.c=$(BUILD)/%.o) $(BUILD)/gen/lua_lib.o
SHELL_OBJ := $(SHELL_SRC:%.c=$(BUILD)/%.o)
CTEST_OBJ := $(CTEST_SRC:%.c=$(BUILD)/%.o)
HEADERS   := Makefile $(wildcard src/*.h src/*.def src/cpu/*.h src/data/*.h src/lua/*.h src/shell/*.h cuda/*.h cuda/*.cuh)

.DEFAULT_GOAL := all
include sim/sim.mk

.PHONY: all deps test asan bench fuzz demo clean probe
ifeq ($(strip $(LUA_CFLAGS)$(LUA_LIBS))$(TENSH_DEPS_TRIED),)
# a fresh machine: install what is missing, then build in a sub-make that sees it
all:
	bash scripts/install-deps.sh
	$(MAKE) TENSH_DEPS_TRIED=1 all
else
all: probe $(BUILD)/tensh $(BUILD)/tensh.so
endif

probe:
	@if [ -n "$(LUA_CFLAGS)$(LUA_LIBS)" ]; then echo "✓ lua5.4"; else echo "✗ lua5.4 not found: run scripts/install-deps.sh"; exit 1; fi
	@if [ "$(CUDA)" = 1 ]; then echo "✓ nvcc $$($(NVCC) --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'): CUDA backend built"; \
	 else echo "✗ nvcc: CPU-only build"; fi
	@if [ "$(CUDA)" = 1 ]; then if [ "$(CUDNN)" = 1 ]; then echo "✓ cuDNN headers: CUDA convolutions through libcudnn where it loads"; \
	 else echo "✗ cuDNN: CUDA convolutions use im2col + GEMM"; fi; fi

$(BUILD)/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# the Lua library is embedded in the binary, so tensh runs from anywhere
$(BUILD)/embed: tools/embed.c
	@mkdir -p $(dir $@)
	$(CC) -O1 -o $@ $<

$(BUILD)/gen/lua_lib.c: $(LUA_LIB) $(BUILD)/embed
	@mkdir -p $(dir $@)
	$(BUILD)/embed $@ $(LUA_LIB)

$(BUILD)/gen/lua_lib.o: $(BUILD)/gen/lua_lib.c
	$(CC) -O1 -fPIC -c $< -o $@

# The cuBLAS forwarders stay out of the dynamic symbol table (-Wl,-E exports the
# rest for Lua modules): exported, they would interpose on libcublas's own calls
# into libcublasLt, re-entering the loader while it is still loading.
$(BUILD)/cuda/cublas_loader.o: NVCC_EXTRA := -Xcompiler -fvisibility=hidden

$(BUILD)/%.o: %.cu $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) -O3 -std=c++17 $(CUDA_ARCH) --expt-relaxed-constexpr -Isrc -Icuda -Xcompiler -fPIC $(NVCC_DEFS) $(NVCC_EXTRA) -DTSC_CUDA_LIB_DIR='"$(CUDA_HOME)/lib64"' -c $< -o $@

$(BUILD)/tensh: $(CORE_OBJ) $(LUA_OBJ) $(SHELL_OBJ) $(CUDA_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(LUA_LIBS) $(LDLIBS) -Wl,-E

# the Lua module: lua5.4 itself provides the Lua API symbols
$(BUILD)/tensh.so: $(CORE_OBJ) $(LUA_OBJ) $(CUDA_OBJ)
	$(CC) $(LDFLAGS) -shared -o $@ $^ $(LDLIBS)

$(CTEST_OBJ): $(wildcard tests/c/*.h tests/c/*.def)

$(BUILD)/test_c: $(CTEST_OBJ) $(CORE_OBJ) $(CUDA_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

deps:
	bash scripts/install-deps.sh

# with the simulated device where it builds (sim/sim.mk): the CUDA suite runs there too
test: all $(BUILD)/test_c $(if $(filter 1,$(SIM)),sim)
	@bash tests/run.sh $(BUILD) $(if $(filter 1,$(SIM)),$(SIM_BUILD))

# UB halts (no silent "runtime error" lines that still exit 0); a too-large
# malloc returns NULL as in a normal build (tensh reports it); leaks are
# reported except the third-party ones listed in tests/lsan.supp.
ASAN_ENV := ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1:check_initialization_order=1:strict_init_order=1 \
            LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0 \
            UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
asan:
	$(ASAN_ENV) $(MAKE) BUILD=build-asan CUDA=0 SIM=0 OPT=-O1 LTO= \
	  SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" test

bench: all
	@bash scripts/bench/run.sh $(BUILD)

# the API fuzzer's long run (make test has a one-minute one):
# FUZZ_SECONDS=N FUZZ_SEED=N; FUZZ_MESSAGES=1 lists the unclear messages
FUZZ_SECONDS ?= 1800
fuzz: all
	FUZZ_HUGE=1 bash tests/fuzz/run.sh $(BUILD) $(FUZZ_SECONDS) $(FUZZ_SEED)

# on a fresh Debian machine: dependencies and Debian's Fashion-MNIST first,
# then a build in a sub-make that sees them, then training on the best device
# (DEMO_ARGS=... passes options, e.g. DEMO_ARGS="--model cnn")
demo:
	bash scripts/install-deps.sh dataset-fashion-mnist
	$(MAKE) all
	$(BUILD)/tensh scripts/train_fashion_mnist.lua $(DEMO_ARGS)

clean:
	rm -rf build build-asan build-sim
