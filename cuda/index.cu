// CUDA kernels of the index family: cat, gather, scatter (and scatter-add),
// masked_select, masked_scatter (and masked_fill), nonzero and unique; sort
// and topk live in sort.cu. The contracts are ops_index.def's and the CPU
// kernels of src/cpu/index.c are the reference.
//
// Ops that only move elements dispatch on the element size, not the dtype
// (fewer instantiations); rows that move as a whole are copied in the widest
// unit their alignment allows. Every index read from a tensor is checked on
// the device: a bad one sets an error record that the entry reads back (one
// host synchronisation, the price of reporting TS_ERR_INDEX with the CPU's
// message instead of a device assert), and nothing is read or written out of
// bounds. Row-major ranks (masks, nonzero, unique) come from a tiled count,
// an exclusive scan of the tile counts, and a tiled emit pass.
#include <limits.h>
#include <string.h>

#include <type_traits>

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>

#include "common.cuh"
#include "device_assert.cuh"


// ---- host helpers -------------------------------------------------------------

namespace {


// One error record per launch: what 0 (none), 1 (a bad index: bad), 2 (an
// output too small for the data: unique only).
struct idx_err {
  unsigned int what;
  unsigned int pad;
  long long bad;
};

// index j as a position in [0, size): negative ones count from the end when wrap;
// -1 when it is out of range (the caller reports j)
__device__ __forceinline__ int64_t resolve_index(int64_t j, int64_t size, bool wrap) {
  const int64_t v = j < 0 && wrap ? j + size : j;
  return v >= 0 && v < size ? v : -1;
}

__device__ __forceinline__ void report(idx_err *e, long long bad, unsigned what = 1) {
  if (*(volatile unsigned *)&e->what == 0 && atomicCAS(&e->what, 0u, what) == 0u) e->bad = bad;
}

// Where gather and scatter send an index out of range: the launch's error
// box, read (after a wait) before the op returns, or, when the op asks for it
// (code != 0: embedding's lookups, inside a training step), the device-assert
// record, raised at the next synchronisation with the op's message.
struct bad_index_sink {
  idx_err *err;
  tsc_assert_record *rec;
  int op, code;
  __device__ __forceinline__ void operator()(long long j, int64_t size) const {
    if (rec) tsc_device_assert(rec, op, code, j, (long long)size, 0);
    else report(err, j);
  }
};

struct err_box {
  tsc_temp buf;
  idx_err *d() const { return (idx_err *)buf.p; }
  ts_status init() {
    ts_status st = buf.alloc(sizeof(idx_err));
    if (st) return st;
    TSC_CHECK(cudaMemsetAsync(buf.p, 0, sizeof(idx_err), tsc_stream()));
    return TS_OK;
  }
  // Waits for the stream: the launches before it have run when this returns.
  ts_status read(idx_err *h) {
    TSC_CHECK(cudaMemcpyAsync(h, buf.p, sizeof *h, cudaMemcpyDeviceToHost, tsc_stream()));
    TSC_CHECK(cudaStreamSynchronize(tsc_stream()));
    return TS_OK;
  }
};

// The device address of t's first element. The op layer lets a 0-dim CPU
// tensor stand for a scalar beside device tensors (ts_check_same_device);
// such a tensor (one element, maybe seen through stride-0 dims) is copied to
// a device temporary, so no kernel ever dereferences host memory.
ts_status dev_data(const ts_tensor *t, const char *op, tsc_temp &tmp, const void **p) {
  if (t->device.type == TS_CUDA) return *p = ts_data(t), TS_OK;
  for (int d = 0; d < t->ndim; d++)
    if (t->sizes[d] > 1 && t->strides[d] != 0)
      return ts_fail(TS_ERR_DEVICE, "%s: expected every tensor on the CUDA device, got a cpu tensor of %lld elements", op,
                     (long long)ts_numel(t));
  size_t es = ts_dtype_size(t->dtype);
  ts_status st = tmp.alloc(es);
  if (st) return st;
  TSC_CHECK(cudaMemcpyAsync(tmp.p, ts_data(t), es, cudaMemcpyHostToDevice, tsc_stream()));
  *p = tmp.p;
  return TS_OK;
}

template <typename F> ts_status with_elem(size_t es, F &&f) {
  switch (es) {
  case 1: return f(uint8_t{});
  case 2: return f(uint16_t{});
  case 4: return f(uint32_t{});
  default: return f(uint64_t{});
  }
}

// uint32_t offsets when they fit (fast division), int64_t otherwise.

template <int W> struct unit_of;
template <> struct unit_of<1> { using type = uint8_t; };
template <> struct unit_of<2> { using type = uint16_t; };
template <> struct unit_of<4> { using type = uint32_t; };
template <> struct unit_of<8> { using type = uint2; };
template <> struct unit_of<16> { using type = uint4; };

// The widest unit (<= 16 bytes) dividing every address and byte count OR-ed into g.
int width_of(uint64_t g) {
  if (g == 0) return 16;
  uint64_t low = g & (~g + 1);
  return low >= 16 ? 16 : (int)low;
}

template <typename F> ts_status with_width(int w, F &&f) {
  switch (w) {
  case 16: return f(std::integral_constant<int, 16>{});
  case 8: return f(std::integral_constant<int, 8>{});
  case 4: return f(std::integral_constant<int, 4>{});
  case 2: return f(std::integral_constant<int, 2>{});
  default: return f(std::integral_constant<int, 1>{});
  }
}

// t's geometry truncated to its first nd dims (for offsets over leading dims).
ts_tensor leading(const ts_tensor *t, int nd) {
  ts_tensor v = *t;
  v.ndim = nd;
  return v;
}


// ---- strided copy (cat's non-contiguous inputs) -------------------------------

template <typename E, typename I>
__global__ void copy_strided_kernel(E *dst, const E *src, tsc_offsets<2, I> o, I n) {
  TSC_GRID_STRIDE(I, e, n) {
    I off[2];
    o.get(e, off);
    dst[off[0]] = src[off[1]];
  }
}

// ---- cat -----------------------------------------------------------------------

// Contiguous inputs, the common case: input k is an (outer, row_k) block that
// lands at column col_k of out's (outer, out_row) rows. Up to CAT_BATCH
// inputs per launch (blockIdx.y picks one); all counts in units of W bytes.
constexpr int CAT_BATCH = 64;
struct cat_part {
  const char *src;
  int64_t row, col, total;
};
struct cat_batch {
  cat_part p[CAT_BATCH];
};

template <int W, typename I>
__global__ void cat_contig_kernel(char *out, int64_t out_row, cat_batch b) {
  using U = typename unit_of<W>::type;
  const cat_part &p = b.p[blockIdx.y];
  I total = (I)p.total, row = (I)p.row;
  U *dst = (U *)out + p.col;
  const U *src = (const U *)p.src;
  TSC_GRID_STRIDE(I, e, total) {
    I o = e / row, c = e - o * row;
    dst[(int64_t)o * out_row + c] = src[e];
  }
}

ts_status cat_flush(char *out, int64_t out_row_bytes, cat_part *parts, int np, uint64_t align) {
  if (np == 0) return TS_OK;
  int w = width_of(align | (uint64_t)out_row_bytes);
  cat_batch b;
  int64_t most = 0;
  for (int k = 0; k < np; k++) {
    b.p[k] = {parts[k].src, parts[k].row / w, parts[k].col / w, parts[k].total / w};
    if (b.p[k].total > most) most = b.p[k].total;
  }
  unsigned gx = tsc_blocks(most);
  unsigned cap = (unsigned)(tsc_sm_count() * 64 / np);
  if (gx > cap) gx = cap < 1 ? 1 : cap;
  dim3 grid(gx, (unsigned)np);
  return with_width(w, [&](auto wc) {
    constexpr int W = decltype(wc)::value;
    if (most < INT32_MAX) cat_contig_kernel<W, uint32_t><<<grid, TSC_THREADS, 0, tsc_stream()>>>(out, out_row_bytes / W, b);
    else cat_contig_kernel<W, int64_t><<<grid, TSC_THREADS, 0, tsc_stream()>>>(out, out_row_bytes / W, b);
    TSC_LAUNCH_CHECK("cat");
    return TS_OK;
  });
}

ts_status k_cat(const ts_call *c) {
  ts_tensor *out = c->out[0];
  int dim = (int)c->i[0];
  if (ts_numel(out) == 0) return TS_OK;
  size_t es = ts_dtype_size(out->dtype);
  char *base = (char *)ts_data(out);
  bool out_contig = ts_is_contiguous(out);
  int64_t inner = 1, outer = 1; // out as (outer, sizes[dim] * inner)
  for (int d = dim + 1; d < out->ndim; d++) inner *= out->sizes[d];
  for (int d = 0; d < dim; d++) outer *= out->sizes[d];
  int64_t out_row = out->sizes[dim] * inner * (int64_t)es; // bytes
  cat_part parts[CAT_BATCH];
  int np = 0;
  uint64_t align = (uint64_t)(uintptr_t)base;
  int64_t pos = 0;
  for (int k = 0; k < c->nin; k++) {
    ts_tensor *in = c->in[k];
    int64_t at = pos;
    pos += in->sizes[dim];
    if (ts_numel(in) == 0) continue;
    if (in->device.type != TS_CUDA) return ts_fail(TS_ERR_DEVICE, "cat: expected every tensor on the CUDA device");
    if (out_contig && ts_is_contiguous(in)) {
      int64_t row = in->sizes[dim] * inner * (int64_t)es;
      parts[np] = {(const char *)ts_data(in), row, at * inner * (int64_t)es, outer * row};
      align |= (uint64_t)(uintptr_t)parts[np].src | (uint64_t)row | (uint64_t)parts[np].col;
      if (++np == CAT_BATCH) {
        ts_status st = cat_flush(base, out_row, parts, np, align);
        if (st) return st;
        np = 0;
        align = (uint64_t)(uintptr_t)base;
      }
      continue;
    }
    ts_tensor part = *out; // out's slice that `in` fills
    part.sizes[dim] = in->sizes[dim];
    ts_tensor *ops[2] = {&part, in};
    char *dst = base + at * out->strides[dim] * (int64_t)es;
    int64_t n = ts_numel(in);
    ts_status st = with_elem(es, [&](auto etag) {
      using E = decltype(etag);
      return tsc_with_index(tsc_fits_32bit<2>(ops), [&](auto itag) {
        using I = decltype(itag);
        tsc_offsets<2, I> o;
        tsc_make_offsets<2, I>(&o, ops);
        copy_strided_kernel<E, I><<<tsc_blocks(n), TSC_THREADS, 0, tsc_stream()>>>((E *)dst, (const E *)ts_data(in), o, (I)n);
        TSC_LAUNCH_CHECK("cat");
        return TS_OK;
      });
    });
    if (st) return st;
  }
  return cat_flush(base, out_row, parts, np, align);
}

// ---- gather and scatter ----------------------------------------------------------

// Both walk the index's positions with three operands: a (written), idx, b
// (read). Gather: a = out, b = the source with stride 0 along dim, which the
// index then moves by j * dstride. Scatter: a = out with stride 0 along dim
// (moved by the index), b = the source.
template <typename E, typename I, bool SCATTER>
__global__ void index_copy_kernel(E *a, const int64_t *idx, const E *b, tsc_offsets<3, I> o, I n, int64_t size,
                                  int64_t dstride, bool wrap, bad_index_sink bad) {
  TSC_GRID_STRIDE(I, e, n) {
    I off[3];
    o.get(e, off);
    const int64_t j = idx[off[1]], v = resolve_index(j, size, wrap);
    if (v < 0) {
      bad(j, size);
      continue;
    }
    if (SCATTER) tsc_store_any(&a[(int64_t)off[0] + v * dstride], b[off[2]]); // repeated indices: one value stays
    else a[off[0]] = b[(int64_t)off[2] + v * dstride];
  }
}

// The same when the dims after dim form one contiguous block of `units` W-byte
// units in a and b and the index is constant over them (index_select,
// embedding lookups, x[idx] and x[idx] = v): one warp moves a row. Offsets
// count elements of es bytes; dstride counts bytes.
template <int W, typename I, bool SCATTER>
__global__ void index_rows_kernel(char *a, const int64_t *idx, const char *b, tsc_offsets<3, I> o, I rows, int64_t units,
                                  int es, int64_t size, int64_t dstride, bool wrap, bad_index_sink bad) {
  using U = typename unit_of<W>::type;
  int lane = threadIdx.x & 31;
  I first = (I)(((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5), step = (I)(((int64_t)gridDim.x * blockDim.x) >> 5);
  for (I r = first; r < rows; r += step) {
    I off[3];
    o.get(r, off);
    const int64_t j = idx[off[1]], v = resolve_index(j, size, wrap);
    if (v < 0) {
      if (lane == 0) bad(j, size);
      continue;
    }
    char *dst = a + (int64_t)off[0] * es;
    const char *src = b + (int64_t)off[2] * es;
    if (SCATTER) dst += v * dstride;
    else src += v * dstride;
    if (SCATTER) // repeated indices: each unit is one of the rows'
      for (int64_t u = lane; u < units; u += 32) tsc_store_any(&((U *)dst)[u], ((const U *)src)[u]);
    else
      for (int64_t u = lane; u < units; u += 32) ((U *)dst)[u] = ((const U *)src)[u];
  }
}

// Scatter-add: integers wrap (two's complement atomics), float16/bfloat16
// add in hardware, uint8, int8 and int16 through a CAS on the aligned word
// (a wrapping add is the same bits signed or not), bool as a logical or (as
// the CPU's add_elem).
__device__ __forceinline__ void byte_update(uint8_t *p, uint8_t s, bool logical) {
  unsigned int *w = (unsigned int *)((uintptr_t)p & ~(uintptr_t)3);
  unsigned shift = (unsigned)((uintptr_t)p & 3) * 8;
  unsigned old = *(volatile unsigned *)w, assumed;
  do {
    unsigned b = (old >> shift) & 0xffu;
    unsigned nb = logical ? (unsigned)(b != 0 || s != 0) : ((b + s) & 0xffu);
    if (nb == b) return;
    assumed = old;
    old = atomicCAS(w, assumed, (assumed & ~(0xffu << shift)) | (nb << shift));
  } while (old != assumed);
}

__device__ __forceinline__ void half_word_add(uint16_t *p, uint16_t s) {
  unsigned int *w = (unsigned int *)((uintptr_t)p & ~(uintptr_t)3);
  unsigned shift = (unsigned)((uintptr_t)p & 2) * 8;
  unsigned old = *(volatile unsigned *)w, assumed;
  do {
    unsigned h = (old >> shift) & 0xffffu, nh = (h + s) & 0xffffu;
    assumed = old;
    old = atomicCAS(w, assumed, (assumed & ~(0xffffu << shift)) | (nh << shift));
  } while (old != assumed);
}

template <typename T> __device__ __forceinline__ void atomic_add_elem(T *p, T v, bool) { atomicAdd(p, v); }
template <> __device__ __forceinline__ void atomic_add_elem<int8_t>(int8_t *p, int8_t v, bool) {
  byte_update((uint8_t *)p, (uint8_t)v, false);
}
template <> __device__ __forceinline__ void atomic_add_elem<int16_t>(int16_t *p, int16_t v, bool) {
  half_word_add((uint16_t *)p, (uint16_t)v);
}
template <> __device__ __forceinline__ void atomic_add_elem<int64_t>(int64_t *p, int64_t v, bool) {
  atomicAdd((unsigned long long *)p, (unsigned long long)v);
}
template <> __device__ __forceinline__ void atomic_add_elem<uint8_t>(uint8_t *p, uint8_t v, bool logical) {
  byte_update(p, v, logical);
}

template <typename T, typename I>
__global__ void scatter_add_kernel(T *a, const int64_t *idx, const T *b, tsc_offsets<3, I> o, I n, int64_t size,
                                   int64_t dstride, bool wrap, bool logical, bad_index_sink bad) {
  TSC_GRID_STRIDE(I, e, n) {
    I off[3];
    o.get(e, off);
    const int64_t j = idx[off[1]], v = resolve_index(j, size, wrap);
    if (v < 0) {
      bad(j, size);
      continue;
    }
    atomic_add_elem<T>(a + (int64_t)off[0] + v * dstride, b[off[2]], logical);
  }
}

// Dims after dim that form one contiguous block in a and b with the index
// constant over them: the block's element count, or 0.
int64_t row_block(const ts_tensor *a, const ts_tensor *idx, const ts_tensor *b, int dim) {
  int64_t inner = 1;
  for (int d = a->ndim - 1; d > dim; d--) {
    if (a->sizes[d] == 1) continue;
    if (idx->strides[d] != 0 || a->strides[d] != inner || b->strides[d] != inner) return 0;
    inner *= a->sizes[d];
  }
  return inner;
}

constexpr int64_t ROW_MIN_BYTES = 128; // shorter rows leave most of a warp idle

// a, idx, b: views over the index's positions (see index_copy_kernel); add
// only for scatter. Fails with the CPU's message on a bad index, or with
// code != 0 reports it as op's device assert (bad_index_sink) and returns at once.
ts_status index_move(bool scatter, bool add, ts_tensor *a, char *ap, ts_tensor *idx, const int64_t *ip, ts_tensor *b,
                     const char *bp, int dim, int64_t size, int64_t dstride, bool wrap, ts_dtype dt, int op, int code) {
  int64_t n = ts_numel(a);
  if (n == 0) return TS_OK;
  size_t es = ts_dtype_size(dt);
  err_box err;
  bad_index_sink bad = {nullptr, nullptr, op, code};
  ts_status st = TS_OK;
  if (code) bad.rec = tsc_assert_record_get(&st);
  else if (!(st = err.init())) bad.err = err.d();
  if (st) return st;
  int64_t inner = add ? 0 : row_block(a, idx, b, dim);
  if (inner > 0 && inner * (int64_t)es >= ROW_MIN_BYTES) {
    ts_tensor ao = leading(a, dim + 1), io = leading(idx, dim + 1), bo = leading(b, dim + 1);
    ts_tensor *ops[3] = {&ao, &io, &bo};
    uint64_t g = (uint64_t)(uintptr_t)ap | (uint64_t)(uintptr_t)bp | (uint64_t)(inner * (int64_t)es) |
                 (uint64_t)(dstride * (int64_t)es);
    for (int d = 0; d <= dim; d++) g |= (uint64_t)(ao.strides[d] * (int64_t)es) | (uint64_t)(bo.strides[d] * (int64_t)es);
    int64_t rows = n / inner;
    st = with_width(width_of(g), [&](auto wc) {
      constexpr int W = decltype(wc)::value;
      { // one offset computation a row: 64-bit math costs little here
        using I = int64_t;
        tsc_offsets<3, I> o;
        tsc_make_offsets<3, I>(&o, ops);
        unsigned blocks = tsc_blocks(rows * 32);
        if (scatter)
          index_rows_kernel<W, I, true><<<blocks, TSC_THREADS, 0, tsc_stream()>>>(
              ap, ip, bp, o, (I)rows, inner * (int64_t)es / W, (int)es, size, dstride * (int64_t)es, wrap, bad);
        else
          index_rows_kernel<W, I, false><<<blocks, TSC_THREADS, 0, tsc_stream()>>>(
              ap, ip, bp, o, (I)rows, inner * (int64_t)es / W, (int)es, size, dstride * (int64_t)es, wrap, bad);
        TSC_LAUNCH_CHECK(scatter ? "scatter" : "gather");
        return TS_OK;
      }
    });
  } else {
    ts_tensor *ops[3] = {a, idx, b};
    st = tsc_with_index(tsc_fits_32bit<3>(ops), [&](auto itag) {
      using I = decltype(itag);
      tsc_offsets<3, I> o;
      tsc_make_offsets<3, I>(&o, ops);
      unsigned blocks = tsc_blocks(n);
      if (add)
        return tsc_dispatch(dt, [&](auto ttag) {
          using T0 = decltype(ttag);
          using T = std::conditional_t<std::is_same<T0, bool>::value, uint8_t, T0>; // bool bytes: a logical or
          scatter_add_kernel<T, I><<<blocks, TSC_THREADS, 0, tsc_stream()>>>(
              (T *)ap, ip, (const T *)bp, o, (I)n, size, dstride, wrap, dt == TS_BOOL, bad);
          TSC_LAUNCH_CHECK("scatter_add");
          return TS_OK;
        });
      return with_elem(es, [&](auto etag) {
        using E = decltype(etag);
        if (scatter)
          index_copy_kernel<E, I, true><<<blocks, TSC_THREADS, 0, tsc_stream()>>>((E *)ap, ip, (const E *)bp, o, (I)n,
                                                                                  size, dstride, wrap, bad);
        else
          index_copy_kernel<E, I, false><<<blocks, TSC_THREADS, 0, tsc_stream()>>>((E *)ap, ip, (const E *)bp, o, (I)n,
                                                                                   size, dstride, wrap, bad);
        TSC_LAUNCH_CHECK(scatter ? "scatter" : "gather");
        return TS_OK;
      });
    });
  }
  if (st || code) return st;
  idx_err h;
  if ((st = err.read(&h))) return st;
  if (h.what)
    return ts_fail(TS_ERR_INDEX, "index %lld is out of bounds for dimension %d with size %lld", h.bad, dim, (long long)size);
  return TS_OK;
}

ts_status k_gather(const ts_call *c) {
  ts_tensor *out = c->out[0], *src = c->in[0], *index = c->in[1];
  int dim = (int)c->i[0];
  if (ts_numel(out) == 0) return TS_OK;
  tsc_temp ts_, ti_;
  const void *sp, *ip;
  ts_status st = dev_data(src, "gather", ts_, &sp);
  if (st || (st = dev_data(index, "gather", ti_, &ip))) return st;
  ts_tensor v = *src; // src walked over out's positions; the index supplies the offset along dim
  memcpy(v.sizes, out->sizes, sizeof v.sizes);
  v.strides[dim] = 0;
  return index_move(false, false, out, (char *)ts_data(out), index, (const int64_t *)ip, &v, (const char *)sp, dim,
                    src->sizes[dim], src->strides[dim], c->i[1] != 0, src->dtype, TS_OP_GATHER, (int)c->i[2]);
}

ts_status k_scatter(const ts_call *c) {
  ts_tensor *out = c->out[0], *index = c->in[0], *src = c->in[1];
  int dim = (int)c->i[0];
  if (ts_numel(index) == 0) return TS_OK;
  tsc_temp ti_, ts_;
  const void *ip, *sp;
  ts_status st = dev_data(index, "scatter", ti_, &ip);
  if (st || (st = dev_data(src, "scatter", ts_, &sp))) return st;
  ts_tensor dst = *out, sv = *src; // both walked over the index's positions
  memcpy(dst.sizes, index->sizes, sizeof dst.sizes);
  dst.strides[dim] = 0;
  memcpy(sv.sizes, index->sizes, sizeof sv.sizes);
  return index_move(true, c->i[1] != 0, &dst, (char *)ts_data(out), index, (const int64_t *)ip, &sv, (const char *)sp,
                    dim, out->sizes[dim], out->strides[dim], c->i[2] != 0, out->dtype, TS_OP_SCATTER, (int)c->i[3]);
}

// ---- tiled ranks: count, scan, emit ----------------------------------------------

// An Op has `bool flag(I i)` (does element i, in row-major order, count) and
// `void emit(I i, int64_t rank, bool flagged)` where rank is the number of
// flagged elements before i. Each block owns one tile of TILE consecutive
// elements, TILE_ITEMS per thread.
constexpr int TILE_THREADS = 256, TILE_ITEMS = 8, TILE = TILE_THREADS * TILE_ITEMS;

template <class Op, typename I>
__global__ void __launch_bounds__(TILE_THREADS) tile_count_kernel(Op op, I n, int64_t *counts) {
  using R = cub::BlockReduce<int, TILE_THREADS>;
  __shared__ typename R::TempStorage tmp;
  int64_t base = (int64_t)blockIdx.x * TILE + (int64_t)threadIdx.x * TILE_ITEMS;
  int c = 0;
#pragma unroll
  for (int k = 0; k < TILE_ITEMS; k++)
    if (base + k < (int64_t)n) c += op.flag((I)(base + k));
  int total = R(tmp).Sum(c);
  if (threadIdx.x == 0) counts[blockIdx.x] = total;
}

using tile_scan = cub::BlockScan<int, TILE_THREADS>;

template <class Op, typename I>
__device__ __forceinline__ void tile_emit(const Op &op, I n, const int64_t *offsets, tile_scan::TempStorage &tmp) {
  using S = tile_scan;
  int64_t base = (int64_t)blockIdx.x * TILE + (int64_t)threadIdx.x * TILE_ITEMS;
  bool f[TILE_ITEMS];
  int c = 0;
#pragma unroll
  for (int k = 0; k < TILE_ITEMS; k++) {
    f[k] = base + k < (int64_t)n && op.flag((I)(base + k));
    c += f[k];
  }
  int before;
  S(tmp).ExclusiveSum(c, before);
  int64_t rank = (offsets ? offsets[blockIdx.x] : 0) + before;
#pragma unroll
  for (int k = 0; k < TILE_ITEMS; k++)
    if (base + k < (int64_t)n) {
      op.emit((I)(base + k), rank, f[k]);
      rank += f[k];
    }
}

template <class Op, typename I>
__global__ void __launch_bounds__(TILE_THREADS) tile_emit_kernel(Op op, I n, const int64_t *offsets) {
  __shared__ tile_scan::TempStorage tmp;
  tile_emit(op, n, offsets, tmp);
}

// 64-bit element indices (masks past 2^31 elements, unique's positions) take
// more registers, and a mask's offsets a division routine call each: with its
// blocks per SM left to ptxas, the kernel spilled 8 to 16 bytes to keep 4 of
// them. Given as 3, it spills nothing.
template <class Op>
__global__ void __launch_bounds__(TILE_THREADS, 3) tile_emit64_kernel(Op op, int64_t n, const int64_t *offsets) {
  __shared__ tile_scan::TempStorage tmp;
  tile_emit(op, n, offsets, tmp);
}

template <typename I, class Op> ts_status run_tiles(const Op &op, int64_t n, const char *what) {
  if (n == 0) return TS_OK;
  int64_t tiles = (n + TILE - 1) / TILE;
  if (tiles > INT_MAX) return ts_fail(TS_ERR_UNSUPPORTED, "%s: %lld elements are too many on cuda", what, (long long)n);
  cudaStream_t s = tsc_stream();
  if (tiles == 1) { // one block sees every element: no counts to scan
    if constexpr (sizeof(I) == 8) tile_emit64_kernel<Op><<<1, TILE_THREADS, 0, s>>>(op, (int64_t)n, nullptr);
    else tile_emit_kernel<Op, I><<<1, TILE_THREADS, 0, s>>>(op, (I)n, nullptr);
    TSC_LAUNCH_CHECK(what);
    return TS_OK;
  }
  tsc_temp counts, offs, scan;
  ts_status st = counts.alloc((size_t)tiles * sizeof(int64_t));
  if (st || (st = offs.alloc((size_t)tiles * sizeof(int64_t)))) return st;
  tile_count_kernel<Op, I><<<(unsigned)tiles, TILE_THREADS, 0, s>>>(op, (I)n, (int64_t *)counts.p);
  TSC_LAUNCH_CHECK(what);
  size_t bytes = 0;
  TSC_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, bytes, (int64_t *)counts.p, (int64_t *)offs.p, (int)tiles, s));
  if ((st = scan.alloc(bytes))) return st;
  TSC_CHECK(cub::DeviceScan::ExclusiveSum(scan.p, bytes, (int64_t *)counts.p, (int64_t *)offs.p, (int)tiles, s));
  if constexpr (sizeof(I) == 8)
    tile_emit64_kernel<Op><<<(unsigned)tiles, TILE_THREADS, 0, s>>>(op, (int64_t)n, (const int64_t *)offs.p);
  else
    tile_emit_kernel<Op, I><<<(unsigned)tiles, TILE_THREADS, 0, s>>>(op, (I)n, (const int64_t *)offs.p);
  TSC_LAUNCH_CHECK(what);
  return TS_OK;
}

// Sums op.flag over [0, n) into *out (zeroed before).
template <class Op, typename I>
__global__ void __launch_bounds__(TSC_THREADS) count_kernel(Op op, I n, unsigned long long *out) {
  using R = cub::BlockReduce<unsigned long long, TSC_THREADS>;
  __shared__ typename R::TempStorage tmp;
  unsigned long long c = 0;
  TSC_GRID_STRIDE(I, e, n) c += op.flag(e);
  unsigned long long total = R(tmp).Sum(c);
  if (threadIdx.x == 0 && total) atomicAdd(out, total);
}

// Non-zero bytes of a 32-bit word: bit 7 of each byte ends up set iff the byte is.
__device__ __forceinline__ int nonzero_bytes(uint32_t w) {
  return __popc((((w & 0x7f7f7f7fu) + 0x7f7f7f7fu) | w) & 0x80808080u);
}

// Contiguous bool/uint8 data, 16-byte aligned: 16 bytes a load.
__global__ void __launch_bounds__(TSC_THREADS) count_bytes_kernel(const uint8_t *p, int64_t n, unsigned long long *out) {
  using R = cub::BlockReduce<unsigned long long, TSC_THREADS>;
  __shared__ typename R::TempStorage tmp;
  int64_t nv = n / 16;
  const uint4 *v = (const uint4 *)p;
  unsigned long long c = 0;
  TSC_GRID_STRIDE(int64_t, i, nv) {
    uint4 w = v[i];
    c += nonzero_bytes(w.x) + nonzero_bytes(w.y) + nonzero_bytes(w.z) + nonzero_bytes(w.w);
  }
  TSC_GRID_STRIDE(int64_t, i, n - nv * 16) c += p[nv * 16 + i] != 0;
  unsigned long long total = R(tmp).Sum(c);
  if (threadIdx.x == 0 && total) atomicAdd(out, total);
}

// ---- masks and nonzero ------------------------------------------------------------

// Elements are compared bitwise under a mask: all bits for integers and
// bool, all but the sign for floats (so -0.0 is zero and NaN is not).
template <typename E, typename I> struct nonzero_op {
  const E *x;
  E mask;
  tsc_offsets<1, I> o;
  int64_t *out; // (limit, nd) with strides s0, s1
  int64_t s0, s1, limit;
  int nd;
  int64_t sizes[TS_MAX_DIMS];
  __device__ bool flag(I i) const {
    I off[1];
    o.get(i, off);
    return (x[off[0]] & mask) != 0;
  }
  __device__ void emit(I i, int64_t rank, bool f) const {
    if (!f || rank >= limit) return;
    I r = i;
    for (int d = nd - 1; d >= 0; d--) {
      I s = (I)sizes[d], q = r / s;
      out[rank * s0 + d * s1] = (int64_t)(r - q * s);
      r = q;
    }
  }
};

uint64_t nonzero_mask(ts_dtype dt) {
  switch (dt) {
  case TS_FLOAT32: return 0x7fffffffull;
  case TS_FLOAT64: return 0x7fffffffffffffffull;
  case TS_FLOAT16:
  case TS_BFLOAT16: return 0x7fffull;
  default: return ~0ull;
  }
}

ts_status k_nonzero(const ts_call *c) {
  ts_tensor *x = c->in[0], *out = c->out[0];
  int64_t n = ts_numel(x);
  tsc_temp tx;
  const void *xp = nullptr;
  ts_status st = n ? dev_data(x, "nonzero", tx, &xp) : TS_OK;
  if (st) return st;
  size_t es = ts_dtype_size(x->dtype);
  ts_tensor xv = *x;
  ts_tensor *ops[1] = {&xv};
  if (c->i[0]) { // the count, into a 0-dim int64 on the device
    unsigned long long *cnt = (unsigned long long *)ts_data(out);
    TSC_CHECK(cudaMemsetAsync(cnt, 0, sizeof *cnt, tsc_stream()));
    if (n == 0) return TS_OK;
    if (es == 1 && ts_is_contiguous(x) && ((uintptr_t)xp & 15) == 0) {
      count_bytes_kernel<<<tsc_blocks(n, TSC_THREADS, 16), TSC_THREADS, 0, tsc_stream()>>>((const uint8_t *)xp, n, cnt);
      TSC_LAUNCH_CHECK("nonzero");
      return TS_OK;
    }
    return with_elem(es, [&](auto etag) {
      using E = decltype(etag);
      return tsc_with_index(tsc_fits_32bit<1>(ops), [&](auto itag) {
        using I = decltype(itag);
        nonzero_op<E, I> op{};
        op.x = (const E *)xp;
        op.mask = (E)nonzero_mask(x->dtype);
        tsc_make_offsets<1, I>(&op.o, ops);
        count_kernel<nonzero_op<E, I>, I><<<tsc_blocks(n), TSC_THREADS, 0, tsc_stream()>>>(op, (I)n, cnt);
        TSC_LAUNCH_CHECK("nonzero");
        return TS_OK;
      });
    });
  }
  int64_t limit = out->sizes[0];
  if (n == 0 || limit == 0 || x->ndim == 0) return TS_OK; // a 0-dim x has no coordinates to write
  return with_elem(es, [&](auto etag) {
    using E = decltype(etag);
    return tsc_with_index(tsc_fits_32bit<1>(ops), [&](auto itag) {
      using I = decltype(itag);
      nonzero_op<E, I> op{};
      op.x = (const E *)xp;
      op.mask = (E)nonzero_mask(x->dtype);
      tsc_make_offsets<1, I>(&op.o, ops);
      op.out = (int64_t *)ts_data(out);
      op.s0 = out->strides[0];
      op.s1 = out->strides[1];
      op.limit = limit;
      op.nd = x->ndim;
      for (int d = 0; d < x->ndim; d++) op.sizes[d] = x->sizes[d];
      return run_tiles<I>(op, n, "nonzero");
    });
  });
}

// masked_select (gather): out[rank] = x[i] where mask[i]; masked_scatter
// (scatter): x[i] = src[rank] where mask[i]. Operands {x, mask}; flat is the
// contiguous side (stride fs), holding limit elements.
template <typename E, typename I> struct mask_op {
  E *x;
  const uint8_t *m;
  tsc_offsets<2, I> o;
  E *flat;
  int64_t fs, limit;
  bool scatter;
  __device__ bool flag(I i) const {
    I off[2];
    o.get(i, off);
    return m[off[1]] != 0;
  }
  __device__ void emit(I i, int64_t rank, bool f) const {
    if (!f || rank >= limit) return;
    I off[2];
    o.get(i, off);
    if (scatter) x[off[0]] = flat[rank * fs];
    else flat[rank * fs] = x[off[0]];
  }
};

// masked_fill: the value comes from the device (vp) or, for a CPU scalar, by value.
template <typename E, typename I>
__global__ void masked_fill_kernel(E *out, const uint8_t *m, tsc_offsets<2, I> o, I n, const E *vp, E v) {
  E val = vp ? *vp : v;
  TSC_GRID_STRIDE(I, e, n) {
    I off[2];
    o.get(e, off);
    if (m[off[1]]) out[off[0]] = val;
  }
}

// The op layer makes the output exactly as large as the mask's count (the
// count ran on this stream just before), so the CPU's size mismatch errors
// cannot arise here; ranks past the output's end are dropped, never written.
ts_status k_masked_select(const ts_call *c) {
  ts_tensor *out = c->out[0], *x = c->in[0], *m = c->in[1];
  int64_t n = ts_numel(x), limit = ts_numel(out);
  if (n == 0 || limit == 0) return TS_OK;
  tsc_temp tx, tm;
  const void *xp, *mp;
  ts_status st = dev_data(x, "masked_select", tx, &xp);
  if (st || (st = dev_data(m, "masked_select", tm, &mp))) return st;
  ts_tensor *ops[2] = {x, m};
  return with_elem(ts_dtype_size(x->dtype), [&](auto etag) {
    using E = decltype(etag);
    return tsc_with_index(tsc_fits_32bit<2>(ops), [&](auto itag) {
      using I = decltype(itag);
      mask_op<E, I> op{};
      op.x = (E *)xp; // read only
      op.m = (const uint8_t *)mp;
      tsc_make_offsets<2, I>(&op.o, ops);
      op.flat = (E *)ts_data(out);
      op.fs = 1; // out is contiguous (ops_index.def): the element of rank r goes to flat[r], whatever out's shape
      op.limit = limit;
      return run_tiles<I>(op, n, "masked_select");
    });
  });
}

ts_status k_masked_scatter(const ts_call *c) {
  ts_tensor *out = c->out[0], *m = c->in[0], *src = c->in[1];
  bool fill = c->i[0] != 0;
  int64_t n = ts_numel(out), limit = ts_numel(src);
  if (n == 0 || limit == 0) return TS_OK;
  tsc_temp tm;
  const void *mp;
  ts_status st = dev_data(m, "masked_scatter", tm, &mp);
  if (st) return st;
  ts_tensor *ops[2] = {out, m};
  size_t es = ts_dtype_size(out->dtype);
  if (!fill && src->device.type != TS_CUDA)
    return ts_fail(TS_ERR_DEVICE, "masked_scatter: expected the source on the CUDA device");
  return with_elem(es, [&](auto etag) {
    using E = decltype(etag);
    return tsc_with_index(tsc_fits_32bit<2>(ops), [&](auto itag) {
      using I = decltype(itag);
      tsc_offsets<2, I> o;
      tsc_make_offsets<2, I>(&o, ops);
      if (fill) {
        E v{};
        const E *vp = nullptr;
        if (src->device.type == TS_CUDA) vp = (const E *)ts_data(src);
        else memcpy(&v, ts_data(src), sizeof v);
        masked_fill_kernel<E, I><<<tsc_blocks(n), TSC_THREADS, 0, tsc_stream()>>>((E *)ts_data(out), (const uint8_t *)mp,
                                                                                  o, (I)n, vp, v);
        TSC_LAUNCH_CHECK("masked_fill");
        return TS_OK;
      }
      mask_op<E, I> op{(E *)ts_data(out), (const uint8_t *)mp, o, (E *)ts_data(src), 1, limit, true}; // src read only
      return run_tiles<I>(op, n, "masked_scatter");
    });
  });
}

// ---- unique -------------------------------------------------------------------------

// Over sorted values v (n, stride ss): element j starts a group when it differs
// from j - 1 as a value (NaN differs from everything, -0.0 equals 0.0, bool
// bytes compare as truth values). Emits each group's value and start, and
// the group of each element at its original position p[j].
template <typename T> __device__ __forceinline__ bool same_value(T a, T b, bool) { return a == b; }
template <> __device__ __forceinline__ bool same_value<__half>(__half a, __half b, bool) {
  return __half2float(a) == __half2float(b);
}
template <> __device__ __forceinline__ bool same_value<__nv_bfloat16>(__nv_bfloat16 a, __nv_bfloat16 b, bool) {
  return __bfloat162float(a) == __bfloat162float(b);
}
template <> __device__ __forceinline__ bool same_value<uint8_t>(uint8_t a, uint8_t b, bool boolean) {
  return boolean ? (a != 0) == (b != 0) : a == b;
}

template <typename T> struct unique_op {
  const T *v;
  int64_t ss;
  bool boolean;
  const int64_t *p;
  int64_t ps;
  T *vals;
  int64_t vs;
  int64_t *inv, is;
  int64_t *starts;
  int64_t u, n;
  idx_err *err;
  __device__ bool flag(int64_t j) const { return j == 0 || !same_value<T>(v[j * ss], v[(j - 1) * ss], boolean); }
  __device__ void emit(int64_t j, int64_t rank, bool f) const {
    int64_t g = rank + f - 1; // the group of j: flagged elements up to and including j, less one
    if (g >= u) {
      report(err, g, 2);
      return;
    }
    if (f) {
      vals[g * vs] = v[j * ss];
      if (starts) starts[g] = j;
    }
    if (inv) {
      int64_t at = p[j * ps];
      if (at < 0 || at >= n) report(err, at, 1);
      else inv[at * is] = g;
    }
  }
};

__global__ void unique_counts_kernel(const int64_t *starts, int64_t u, int64_t n, int64_t *counts, int64_t cs) {
  TSC_GRID_STRIDE(int64_t, g, u) counts[g * cs] = (g + 1 < u ? starts[g + 1] : n) - starts[g];
}

ts_status k_unique(const ts_call *c) {
  ts_tensor *sorted = c->in[0], *pos = c->in[1];
  ts_dtype dt = sorted->dtype;
  int64_t n = sorted->sizes[0];
  if (sorted->device.type != TS_CUDA || pos->device.type != TS_CUDA)
    return ts_fail(TS_ERR_DEVICE, "unique: expected the sorted values and positions on the CUDA device");
  return tsc_dispatch(dt, [&](auto ttag) {
    using T0 = decltype(ttag);
    using T = std::conditional_t<std::is_same<T0, bool>::value, uint8_t, T0>;
    unique_op<T> op{};
    op.v = (const T *)ts_data(sorted);
    op.ss = sorted->strides[0];
    op.boolean = dt == TS_BOOL;
    op.n = n;
    if (c->i[0]) { // the distinct count, into a 0-dim int64 on the device
      unsigned long long *cnt = (unsigned long long *)ts_data(c->out[0]);
      TSC_CHECK(cudaMemsetAsync(cnt, 0, sizeof *cnt, tsc_stream()));
      if (n == 0) return TS_OK;
      count_kernel<unique_op<T>, int64_t><<<tsc_blocks(n), TSC_THREADS, 0, tsc_stream()>>>(op, n, cnt);
      TSC_LAUNCH_CHECK("unique");
      return TS_OK;
    }
    ts_tensor *vals = c->out[0], *inv = c->out[1], *counts = c->out[2];
    op.u = vals->sizes[0];
    if (n == 0) return TS_OK;
    err_box err;
    tsc_temp starts;
    ts_status st = err.init();
    if (st || (counts && op.u > 0 && (st = starts.alloc((size_t)op.u * sizeof(int64_t))))) return st;
    op.p = (const int64_t *)ts_data(pos);
    op.ps = pos->strides[0];
    op.vals = (T *)ts_data(vals);
    op.vs = vals->strides[0];
    op.inv = inv ? (int64_t *)ts_data(inv) : nullptr;
    op.is = inv ? inv->strides[0] : 0;
    op.starts = (int64_t *)starts.p;
    op.err = err.d();
    if ((st = run_tiles<int64_t>(op, n, "unique"))) return st;
    if (counts && op.u > 0) {
      unique_counts_kernel<<<tsc_blocks(op.u), TSC_THREADS, 0, tsc_stream()>>>(op.starts, op.u, n, (int64_t *)ts_data(counts),
                                                                               counts->strides[0]);
      TSC_LAUNCH_CHECK("unique");
    }
    idx_err h;
    if ((st = err.read(&h))) return st;
    if (h.what == 2) return ts_fail(TS_ERR_SHAPE, "unique: more distinct values than the output holds");
    if (h.what) return ts_fail(TS_ERR_INDEX, "unique: position %lld out of range", h.bad);
    return TS_OK;
  });
}

} // namespace

extern "C" void tsc_register_index(ts_kernel *k) {
  k[TS_OP_CAT] = k_cat;
  k[TS_OP_GATHER] = k_gather;
  k[TS_OP_SCATTER] = k_scatter;
  k[TS_OP_MASKED_SELECT] = k_masked_select;
  k[TS_OP_MASKED_SCATTER] = k_masked_scatter;
  k[TS_OP_NONZERO] = k_nonzero;
  k[TS_OP_SORT] = tsc_sort_kernel;
  k[TS_OP_TOPK] = tsc_sort_kernel;
  k[TS_OP_UNIQUE] = k_unique;
}
