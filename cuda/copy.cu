// CUDA kernels of the copy family: COPY (every dtype pair, any strides, on
// one device; src/ops/op_device.c moves bytes between devices),
// FILL, ARANGE and LINSPACE. src/cpu/copy.c is the spec: conversions as its
// C casts (tsc_cvt), fill values converted once on the host by the same core
// functions, arange and linspace computed in double with the CPU's formulas,
// each product and sum rounded on its own (no FMA), so the bits match.
#include <string.h>

#include "loops.cuh"

namespace {

// ---- on one device -------------------------------------------------------------------
template <typename D> struct f_cvt {
  template <typename S> __device__ D operator()(S s) const { return tsc_cvt<D>(s); }
};
struct f_same {
  template <typename U> __device__ U operator()(U s) const { return s; }
};

template <typename U> ts_status copy_bits(ts_tensor *dst, ts_tensor *src) {
  return tsc_elementwise<U, U>("copy", dst, &src, f_same{});
}

// dst <- src with dst on the current device; src on the same device, or a
// single value on the host (a Lua number, a 0-dim CPU tensor).
ts_status copy_device(ts_tensor *dst, ts_tensor *src) {
  int64_t n = ts_numel(dst);
  if (n == 0) return TS_OK;
  if (src->dtype == dst->dtype) {
    if (src->device.type == TS_CUDA && tsc_dense(dst) && tsc_dense(src)) {
      TSC_CHECK(cudaMemcpyAsync(ts_data(dst), ts_data(src), (size_t)n * ts_dtype_size(dst->dtype),
                                cudaMemcpyDeviceToDevice, tsc_stream()));
      return TS_OK;
    }
    switch (ts_dtype_size(dst->dtype)) {
    case 1: return copy_bits<uint8_t>(dst, src);
    case 2: return copy_bits<uint16_t>(dst, src);
    case 4: return copy_bits<uint32_t>(dst, src);
    case 8: return copy_bits<uint64_t>(dst, src);
    default: return ts_fail(TS_ERR_DTYPE, "copy: unexpected dtype %s on cuda", ts_dtype_name(dst->dtype));
    }
  }
  return tsc_dispatch(dst->dtype, [&](auto dtag) {
    using D = decltype(dtag);
    return tsc_dispatch(src->dtype, [&](auto stag) -> ts_status {
      using S = decltype(stag);
      if constexpr (std::is_same<D, S>::value) return TS_OK; // handled above; never instantiated as a kernel
      else return tsc_elementwise<D, S>("copy", dst, &src, f_cvt<D>{});
    });
  });
}

// Copies between devices never come here: ts_copy_ sends them to the
// backend's copy_bytes (src/ops/op_device.c). A CPU source here is a 0-dim scalar
// (the dispatcher lets nothing else through), passed by value.
ts_status k_copy(const ts_call *c) { return copy_device(c->out[0], c->in[0]); }

// ---- fill ---------------------------------------------------------------------------
template <typename U> struct f_value {
  U v;
  __device__ U operator()() const { return v; }
};

template <typename U> ts_status fill_bits(ts_tensor *out, const char *bytes) {
  U v;
  memcpy(&v, bytes, sizeof v);
  return tsc_elementwise<U>("fill", out, nullptr, f_value<U>{v});
}

ts_status k_fill(const ts_call *c) {
  ts_tensor *out = c->out[0];
  int64_t n = ts_numel(out);
  if (n == 0) return TS_OK;
  // the value in out's dtype, converted by the CPU's own functions
  char v[8] = {0};
  if (ts_dtype_is_int(out->dtype) && c->i[0]) ts_store_i64(v, out->dtype, c->i[1]); // exact int64
  else ts_store_f64(v, out->dtype, c->f[0]);
  size_t w = ts_dtype_size(out->dtype);
  bool same_bytes = true; // zeros, -1, any byte: one memset
  for (size_t k = 1; k < w; k++) same_bytes = same_bytes && v[k] == v[0];
  if (same_bytes && tsc_dense(out)) {
    TSC_CHECK(cudaMemsetAsync(ts_data(out), (unsigned char)v[0], (size_t)n * w, tsc_stream()));
    return TS_OK;
  }
  switch (w) {
  case 1: return fill_bits<uint8_t>(out, v);
  case 2: return fill_bits<uint16_t>(out, v);
  case 4: return fill_bits<uint32_t>(out, v);
  case 8: return fill_bits<uint64_t>(out, v);
  default: return ts_fail(TS_ERR_DTYPE, "fill: unexpected dtype %s on cuda", ts_dtype_name(out->dtype));
  }
}

// ---- arange, linspace ---------------------------------------------------------------
// The CPU stores through ts_store_f64 / ts_store_i64: tsc_cvt from double is
// the former; from int64, floating types go through double as it does.
template <typename T> __device__ __forceinline__ T store_i64(int64_t v) {
  if constexpr (tsc_is_float<T>::value) return tsc_cvt<T>((double)v);
  else return tsc_cvt<T>(v);
}

// out[i*os] for i in [0, n); mode 0: f0 + i*f1 (double); 1: i0 + i*i1
// (int64, wrapping); 2: linspace from f0 to f1 with step f2, each half
// counted from its own end.
template <typename T>
__global__ void __launch_bounds__(TSC_THREADS)
    k_range(T *out, int64_t os, int64_t n, int mode, double f0, double f1, double f2, int64_t i0, int64_t i1) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
    T r;
    if (mode == 1) {
      r = store_i64<T>((int64_t)((uint64_t)i0 + (uint64_t)i * (uint64_t)i1));
    } else if (mode == 0) {
      r = tsc_cvt<T>(__dadd_rn(f0, __dmul_rn((double)i, f1)));
    } else {
      double v = n == 1 ? f0 : i < n / 2 ? __dadd_rn(f0, __dmul_rn(f2, (double)i)) : __dsub_rn(f1, __dmul_rn(f2, (double)(n - 1 - i)));
      r = tsc_cvt<T>(v);
    }
    out[i * os] = r;
  }
}

ts_status launch_range(const ts_call *c, int mode, double f0, double f1, double f2, int64_t i0, int64_t i1) {
  ts_tensor *out = c->out[0];
  int64_t n = ts_numel(out);
  if (n == 0) return TS_OK;
  int64_t os = out->ndim == 1 ? out->strides[0] : 1; // a fresh 1-d tensor
  return tsc_dispatch(out->dtype, [&](auto tag) {
    using T = decltype(tag);
    k_range<T><<<tsc_blocks(n), TSC_THREADS, 0, tsc_stream()>>>(tsc_ptr<T>(out), os, n, mode, f0, f1, f2, i0, i1);
    TSC_LAUNCH_CHECK(ts_ops[c->op].name);
    return TS_OK;
  });
}

ts_status k_arange(const ts_call *c) {
  if (c->i[0]) return launch_range(c, 1, 0, 0, 0, c->i[1], c->i[2]); // integer start and step: exact
  return launch_range(c, 0, c->f[0], c->f[1], 0, 0, 0);
}

ts_status k_linspace(const ts_call *c) {
  int64_t n = ts_numel(c->out[0]);
  double start = c->f[0], end = c->f[1], step = n > 1 ? (end - start) / (double)(n - 1) : 0; // on the host, as the CPU
  return launch_range(c, 2, start, end, step, 0, 0);
}

} // namespace

extern "C" void tsc_register_copy(ts_kernel *k) {
  k[TS_OP_COPY] = k_copy;
  k[TS_OP_FILL] = k_fill;
  k[TS_OP_ARANGE] = k_arange;
  k[TS_OP_LINSPACE] = k_linspace;
}
