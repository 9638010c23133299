# The simulated CUDA device (`make sim` -> build-sim/tensh, build-sim/tensh.so):
# the same cuda/*.cu compiled by the host C++ compiler, launches rewritten by
# tools/simlaunch.c, run by sim/ on the CPU. Needs CUDA's headers (not a GPU,
# not nvcc's device compiler) and Boost.Context. Included by the Makefile.
SIM_BUILD  := build-sim
SIM_CUDA_INC ?= $(firstword $(wildcard $(CUDA_HOME)/include/cuda_runtime.h /usr/local/cuda/include/cuda_runtime.h))
SIM        ?= $(if $(and $(SIM_CUDA_INC),$(wildcard /usr/include/boost/context/fiber.hpp)),1,0)
SIM_CU     := $(filter-out cuda/cublas_loader.cu,$(CUDA_SRC))
SIM_CUH    := $(wildcard cuda/*.cuh)
SIM_RT     := $(wildcard sim/*.cc)
SIM_GEN_CUH := $(SIM_CUH:cuda/%=$(SIM_BUILD)/gen/cuda/%)
SIM_OBJ    := $(CORE_SRC:%.c=$(SIM_BUILD)/%.o) $(LUA_SRC:%.c=$(SIM_BUILD)/%.o) $(SIM_BUILD)/gen/lua_lib.o \
              $(SIM_CU:cuda/%.cu=$(SIM_BUILD)/gen/cuda/%.o) $(SIM_RT:%.cc=$(SIM_BUILD)/%.o)
SIM_SHELL_OBJ := $(SHELL_SRC:%.c=$(SIM_BUILD)/%.o)
# -ffp-contract=off: a*b+c stays two roundings, as CUDA's __*_rn and the CPU kernels
SIM_CXXFLAGS := -std=c++17 -O2 -g -MMD -MP -fPIC -ffp-contract=off -fno-strict-aliasing -w -pthread \
                -include sim/cuda_sim.h -Isim/include -Isim -I$(dir $(SIM_CUDA_INC)) -Isrc -Icuda $(BLAS_INC)
# The CUDA sources (not sim/ itself) get GCC's ThreadSanitizer instrumentation
# without its runtime: each load, store and atomic calls sim/check.cc first.
# Volatile accesses are told apart (PTX makes them relaxed atomics). No
# scalar replacement of aggregates: a 16-byte vector load (tsc_vec, float4)
# stays one access, as on a GPU, instead of four 4-byte loads whose
# misalignment no check would see (and four checks instead of one).
SIM_CHECK_FLAGS := -fsanitize=thread --param=tsan-instrument-func-entry-exit=0 --param=tsan-distinguish-volatile=1 \
                   -fno-tree-sra
SIM_CFLAGS := $(filter-out $(LTO) -DTS_HAVE_CUDA,$(CFLAGS)) -DTS_HAVE_CUDA -DTS_SIM_DEVICE
SIM_LIBS   := $(filter-out -lcudart_static -L$(CUDA_HOME)/lib64 $(CUDA_WRAP),$(LDLIBS)) -lboost_context -lstdc++ -ldl \
              $(CUDA_WRAP)

.PHONY: sim
ifeq ($(SIM),1)
sim: $(SIM_BUILD)/tensh $(SIM_BUILD)/tensh.so
else
sim:
	@echo "✗ simulated device not built: it needs CUDA's headers (cuda_runtime.h) and libboost-context-dev"
endif

# headers: -MMD -MP as in the Makefile; flags: a file rewritten when they change
SIM_C_OBJ  := $(CORE_SRC:%.c=$(SIM_BUILD)/%.o) $(LUA_SRC:%.c=$(SIM_BUILD)/%.o) $(SIM_SHELL_OBJ)
SIM_CC_OBJ := $(SIM_CU:cuda/%.cu=$(SIM_BUILD)/gen/cuda/%.o) $(SIM_RT:%.cc=$(SIM_BUILD)/%.o)
ifeq ($(SIM)$(filter clean deps,$(MAKECMDGOALS)),1)
-include $(SIM_C_OBJ:.o=.d) $(SIM_CC_OBJ:.o=.d)
$(SIM_C_OBJ): $(call flags_file,$(SIM_BUILD)/.flags-cc,SIM_CFLAGS)
$(SIM_CC_OBJ): $(call flags_file,$(SIM_BUILD)/.flags-cxx,SIM_CXXFLAGS) $(call flags_file,$(SIM_BUILD)/.flags-check,SIM_CHECK_FLAGS)
endif

$(SIM_BUILD)/simlaunch: tools/simlaunch.c
	@mkdir -p $(dir $@)
	$(call say,CC,$<)$(CC) -O1 -o $@ $<

$(SIM_BUILD)/gen/cuda/%.cuh: cuda/%.cuh $(SIM_BUILD)/simlaunch
	@mkdir -p $(dir $@)
	$(call say,SIMLAUNCH,$<)$(SIM_BUILD)/simlaunch $< $@

$(SIM_BUILD)/gen/cuda/%.cc: cuda/%.cu $(SIM_BUILD)/simlaunch
	@mkdir -p $(dir $@)
	$(call say,SIMLAUNCH,$<)$(SIM_BUILD)/simlaunch $< $@

# every generated .cuh first: the compiler's dependency list only exists after a first compile
$(SIM_BUILD)/gen/cuda/%.o: $(SIM_BUILD)/gen/cuda/%.cc $(SIM_GEN_CUH)
	$(call say,CXX-SIM,cuda/$*.cu)$(CXX) $(SIM_CXXFLAGS) $(SIM_CHECK_FLAGS) -c $< -o $@

# (the sanitizers of `make asan` for the simulator itself: sim/exec.cc tells ASan of its fiber switches)
$(SIM_BUILD)/sim/%.o: sim/%.cc
	@mkdir -p $(dir $@)
	$(call say,CXX-SIM,$<)$(CXX) $(SIM_CXXFLAGS) $(SAN) -c $< -o $@

$(SIM_BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(call say,CC-SIM,$<)$(CC) $(SIM_CFLAGS) -c $< -o $@

$(SIM_BUILD)/gen/lua_lib.o: $(BUILD)/gen/lua_lib.c
	@mkdir -p $(dir $@)
	$(call say,CC-SIM,$<)$(CC) -O1 -fPIC -c $< -o $@

$(SIM_BUILD)/tensh: $(SIM_OBJ) $(SIM_SHELL_OBJ)
	$(call say,LINK,$@)$(CXX) -O2 -pthread -o $@ $^ $(LUA_LIBS) $(SIM_LIBS) -Wl,-E

$(SIM_BUILD)/tensh.so: $(SIM_OBJ)
	$(call say,LINK,$@)$(CXX) -O2 -pthread -shared -o $@ $^ $(SIM_LIBS)
.PRECIOUS: $(SIM_BUILD)/gen/cuda/%.cc $(SIM_BUILD)/gen/cuda/%.cuh

# The simulator's own tests: deliberately broken CUDA code (tests/lua/test_cuda_sim.lua)
SIM_RT_OBJ := $(SIM_RT:%.cc=$(SIM_BUILD)/%.o)
$(SIM_BUILD)/gen/tests/sim/%.cc: tests/sim/%.cu $(SIM_BUILD)/simlaunch
	@mkdir -p $(dir $@)
	$(call say,SIMLAUNCH,$<)$(SIM_BUILD)/simlaunch $< $@

$(SIM_BUILD)/gen/tests/sim/%.o: $(SIM_BUILD)/gen/tests/sim/%.cc sim/cuda_sim.h
	$(call say,CXX-SIM,tests/sim/$*.cu)$(CXX) $(SIM_CXXFLAGS) $(SIM_CHECK_FLAGS) -O0 -c $< -o $@

$(SIM_BUILD)/sim_selftest: $(SIM_BUILD)/gen/tests/sim/selftest.o $(SIM_BUILD)/gen/tests/sim/checks.o $(SIM_RT_OBJ)
	$(call say,LINK,$@)$(CXX) -pthread -o $@ $^ $(BLAS_LIBS) -lboost_context $(SAN)

ifeq ($(SIM),1)
sim: $(SIM_BUILD)/sim_selftest
endif
.PRECIOUS: $(SIM_BUILD)/gen/tests/sim/%.cc

# Mutation testing of the simulator, not part of `make test`: known GPU bugs
# put into cuda/ one at a time must each fail the tests that cover them
# (scripts/sim_mutants.sh; MUTANTS="name ..." runs some).
.PHONY: sim-mutants
sim-mutants: sim
	bash scripts/sim_mutants.sh $(MUTANTS)
