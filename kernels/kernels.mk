# kernels.mk - included by the top Makefile. The CPU twins and the INT4
# layout code are plain C and always built. Where nvcc exists (NVCC set) the
# CUDA kernels are compiled for sm_86 (A10G) and sm_90 (H100/H200) plus
# sm_90 PTX, and fgpack links the static CUDA runtime; elsewhere
# kernels/nocuda.c answers every GPU call with FG_EUNSUPPORTED.

# This file is read before the Makefile's first rule: keep `make` = `make all`.
.DEFAULT_GOAL := all

KERNEL_C := kernels/cpu_twin.c kernels/int4_layout.c
KERNEL_CU := $(wildcard kernels/*.cu)
NVCC_ARCH ?= -gencode arch=compute_86,code=sm_86 -gencode arch=compute_90,code=sm_90 \
             -gencode arch=compute_90,code=compute_90
NVCC_FLAGS ?= -std=c++17 -O3 -lineinfo -Xcompiler -Wall,-Wextra,-Werror
# make KTRACE=1: a measuring build whose kernels record when each block
# starts, waits and reaches its marks (FG_KTRACE_OUT; docs/gpu.md)
ifeq ($(KTRACE),1)
NVCC_FLAGS += -DFG_KTRACE
endif
# make I8DLY=1: a measuring build whose i8 matvec holds its first loads back
# (FG_I8_DELAY ns, FG_I8_DELAY_BLOCKS; kernels/int4_i8.cu)
ifeq ($(I8DLY),1)
NVCC_FLAGS += -DFG_I8_DELAY
endif
# Ask nvcc itself where its runtime libraries are: NVCC may be a wrapper
# script (CI's /usr/local/bin/nvcc), so its path says nothing about them.
ifeq ($(origin CUDA_LIBDIR),undefined)
ifneq ($(strip $(NVCC)),)
CUDA_LIBDIR := $(shell $(NVCC) -dryrun -x cu -c /dev/null -o /dev/null 2>&1 | \
  sed -n 's/^\#\$$ LIBRARIES=.*"-L\([^"]*\)"[[:space:]]*$$/\1/p' | tail -n 1)
endif
endif

ifneq ($(strip $(NVCC)),)
KERNEL_OBJS += $(KERNEL_C:%.c=$(BUILD)/%.o) $(KERNEL_CU:%.cu=$(BUILD)/%.cu.o)
CFLAGS += -DFG_HAVE_CUDA
LDLIBS += -L$(CUDA_LIBDIR) -lcudart_static -ldl -lrt -lstdc++
else
KERNEL_OBJS += $(KERNEL_C:%.c=$(BUILD)/%.o) $(BUILD)/kernels/nocuda.o
endif

$(BUILD)/kernels/%.cu.o: kernels/%.cu kernels/kcommon.cuh kernels/fg_kernels.h kernels/i8split.h kernels/moeroute.h \
			 lib/err.h lib/bf16.h
	@mkdir -p $(@D)
	$(NVCC) $(NVCC_FLAGS) $(NVCC_ARCH) -I. -Ilib -c -o $@ $<

# The kernel objects call lib/ (fg_err_set) but follow libfg.a on the link
# lines: name the archive once more after them.
LDLIBS := $(LIBFG) $(LDLIBS)

# GPU benchmark drivers, bench/<name>.c (bench/engine_gpu.sh builds and runs
# one); a pattern rule, so that it never becomes the default goal.
$(BUILD)/bench/%: bench/%.c $(LIBFG) $(KERNEL_OBJS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBFG) $(KERNEL_OBJS) $(LDLIBS)

# Standalone GPU microbenchmarks, bench/<name>.cu (no fgpack code in them).
ifneq ($(strip $(NVCC)),)
$(BUILD)/bench/%: bench/%.cu bench/gpubench.cuh
	@mkdir -p $(@D)
	$(NVCC) $(NVCC_FLAGS) $(NVCC_ARCH) -o $@ $<
endif

-include $(KERNEL_C:%.c=$(BUILD)/%.d) $(BUILD)/kernels/nocuda.d
