// CUB as the simulated device provides it: the parts our kernels use, with
// CUB's contracts, computed plainly.
//   BlockReduce<T, N>::Sum: the total is valid in thread 0 only (the others
//     get a poisoned value, so code that reads it elsewhere fails here);
//     TempStorage may be reused only after a __syncthreads.
//   BlockScan<T, N>::ExclusiveSum: every thread's exclusive prefix.
//   DeviceScan::ExclusiveSum, DeviceRadixSort::SortPairs (stable, by bits
//   [begin, end)), DeviceSegmentedSort::StableSortPairs: a first call with
//   no temporary storage asks its size; the second runs in stream order on
//   the host, after checking every range against its allocation.
#pragma once

#include <algorithm>
#include <functional>
#include <numeric>
#include <vector>

namespace tsim {
cudaError_t enqueue_host(cudaStream_t s, const char *what, std::function<void()> fn);
cudaError_t check_device_range(const void *p, size_t n, int device, const char *what);
} // namespace tsim

namespace cub {

template <typename T> inline T poisoned() {
  T v;
  memset((void *)&v, 0x5a, sizeof v);
  return v;
}

template <typename T, int BLOCK_THREADS> class BlockReduce {
public:
  struct TempStorage {
    T v[BLOCK_THREADS];
  };
  explicit BlockReduce(TempStorage &s) : s_(s) {}
  T Sum(T x) {
    int i = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    s_.v[i] = x;
    __syncthreads();
    if (i != 0) return poisoned<T>();
    T total = s_.v[0];
    for (int k = 1; k < BLOCK_THREADS; k++) total = total + s_.v[k];
    return total;
  }

private:
  TempStorage &s_;
};

template <typename T, int BLOCK_THREADS> class BlockScan {
public:
  struct TempStorage {
    T v[BLOCK_THREADS];
  };
  explicit BlockScan(TempStorage &s) : s_(s) {}
  void ExclusiveSum(T x, T &out) {
    int i = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    s_.v[i] = x;
    __syncthreads();
    T acc = T();
    for (int k = 0; k < i; k++) acc = acc + s_.v[k];
    out = acc;
    __syncthreads(); // CUB's scan is done with its storage when it returns
  }

private:
  TempStorage &s_;
};

// The size every device-wide call asks for: what CUB would need is not ours
// to know; any nonzero size exercises the caller's allocation.
constexpr size_t TEMP_BYTES = 256;

inline cudaError_t temp_check(void *temp, size_t &bytes) {
  if (!temp) return bytes = TEMP_BYTES, cudaSuccess;
  if (bytes < TEMP_BYTES) return cudaErrorInvalidValue;
  return tsim::check_device_range(temp, bytes, -1, "CUB temporary storage");
}

template <typename T> inline cudaError_t range(const T *p, int64_t n, const char *what) {
  return n ? tsim::check_device_range(p, (size_t)n * sizeof(T), -1, what) : cudaSuccess;
}

struct DeviceScan {
  template <typename In, typename Out>
  static cudaError_t ExclusiveSum(void *temp, size_t &bytes, In in, Out out, int n, cudaStream_t s = 0) {
    if (!temp || n <= 0) return temp_check(temp, bytes);
    cudaError_t e = temp_check(temp, bytes);
    if (e || (e = range(in, n, "DeviceScan input")) || (e = range(out, n, "DeviceScan output"))) return e;
    return tsim::enqueue_host(s, "cub::DeviceScan::ExclusiveSum", [in, out, n] {
      std::vector<std::remove_cv_t<std::remove_pointer_t<In>>> v(in, in + n);
      typename decltype(v)::value_type acc{};
      for (int i = 0; i < n; i++) out[i] = acc, acc = acc + v[i];
    });
  }
};

template <typename K, typename V>
inline void stable_pairs(const K *kin, K *kout, const V *vin, V *vout, int64_t n, std::function<bool(K, K)> less) {
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return less(kin[a], kin[b]); });
  std::vector<K> ks(n);
  std::vector<V> vs(n);
  for (int64_t i = 0; i < n; i++) ks[i] = kin[order[i]], vs[i] = vin[order[i]];
  std::copy(ks.begin(), ks.end(), kout);
  std::copy(vs.begin(), vs.end(), vout);
}

struct DeviceRadixSort {
  template <typename K, typename V, typename N>
  static cudaError_t SortPairs(void *temp, size_t &bytes, const K *kin, K *kout, const V *vin, V *vout, N n,
                               int begin_bit = 0, int end_bit = sizeof(K) * 8, cudaStream_t s = 0) {
    cudaError_t e = temp_check(temp, bytes);
    if (!temp || e || n <= 0) return e;
    if ((e = range(kin, n, "SortPairs keys in")) || (e = range(kout, n, "SortPairs keys out")) ||
        (e = range(vin, n, "SortPairs values in")) || (e = range(vout, n, "SortPairs values out")))
      return e;
    return tsim::enqueue_host(s, "cub::DeviceRadixSort::SortPairs", [=] {
      using U = std::make_unsigned_t<K>;
      U m = end_bit - begin_bit >= (int)sizeof(K) * 8 ? (U)~(U)0 : (U)((((U)1) << (end_bit - begin_bit)) - 1);
      stable_pairs<K, V>(kin, kout, vin, vout, (int64_t)n,
                         [=](K a, K b) { return ((U)a >> begin_bit & m) < ((U)b >> begin_bit & m); });
    });
  }
};

struct DeviceSegmentedSort {
  template <typename K, typename V, typename N, typename S, typename O>
  static cudaError_t StableSortPairs(void *temp, size_t &bytes, const K *kin, K *kout, const V *vin, V *vout, N n,
                                     S nseg, O begins, O ends, cudaStream_t s = 0) {
    cudaError_t e = temp_check(temp, bytes);
    if (!temp || e || n <= 0) return e;
    if ((e = range(kin, n, "StableSortPairs keys in")) || (e = range(kout, n, "StableSortPairs keys out")) ||
        (e = range(vin, n, "StableSortPairs values in")) || (e = range(vout, n, "StableSortPairs values out")) ||
        (e = range(begins, nseg, "StableSortPairs begin offsets")) || (e = range(ends, nseg, "StableSortPairs end offsets")))
      return e;
    return tsim::enqueue_host(s, "cub::DeviceSegmentedSort::StableSortPairs", [=] {
      for (int64_t r = 0; r < (int64_t)nseg; r++) {
        int64_t b = begins[r], en = ends[r];
        if (b < 0 || en > (int64_t)n || b > en) abort(); // checked contract: offsets inside the arrays
        stable_pairs<K, V>(kin + b, kout + b, vin + b, vout + b, en - b, [](K x, K y) { return x < y; });
      }
    });
  }
};

} // namespace cub
