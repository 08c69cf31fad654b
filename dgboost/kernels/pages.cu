// A tree's sample gathered from an out-of-core matrix's pages (twin: cpu.gather_page_rows).
// The pages lie in pinned host memory, which the device addresses directly (unified
// addressing): each sampled row's words cross the bus once, and nothing waits on the host.
// A page still in a device buffer after a pass is read there: an address is either.
#include "common.cuh"

// out[i, w] = word w of row rows[i] - base, in the page p with first[p] <= that row < first[p + 1].
// Consecutive threads take consecutive words of a row, then the next row's: the reads of a
// warp are runs of the pages, the writes one run of `out`.
extern "C" __global__ void gather_page_rows(const u64* __restrict__ page_address, const i64* __restrict__ first,
                                            const int n_pages, const i64* __restrict__ rows, const i64 n,
                                            const i64 base, const int n_words, u32* __restrict__ out)
{
    for (i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x; t < n * n_words; t += (i64)gridDim.x * blockDim.x) {
        const i64 i = t / n_words, row = rows[i] - base;
        int lo = 0, hi = n_pages - 1;  // the last page whose first row is at most `row`
        while (lo < hi) {
            const int mid = (lo + hi + 1) / 2;
            if (first[mid] <= row) lo = mid; else hi = mid - 1;
        }
        const u32* page = reinterpret_cast<const u32*>(page_address[lo]);
        out[t] = page[(row - first[lo]) * n_words + (int)(t - i * n_words)];
    }
}

// A sample page's pairs and drawn flags (twin: cpu.fill_sample_page): place i < n holds the
// guessed row guessed[i] (its pair, drawn or not); place n + j < n + room the missed row
// missed[j] where j < n_missed[0] (drawn), else nothing; every place after, nothing (a zero
// pair, not drawn).
extern "C" __global__ void fill_sample_page(const float* __restrict__ gpair, const bool* __restrict__ drawn,
                                            const i64* __restrict__ guessed, const i64 n,
                                            const i64* __restrict__ missed, const i64 room,
                                            const i64* __restrict__ n_missed, const i64 capacity,
                                            float* __restrict__ pairs, bool* __restrict__ page_drawn)
{
    const i64 found = n_missed[0];
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < capacity; i += (i64)gridDim.x * blockDim.x) {
        i64 row = -1;
        bool taken = false;
        if (i < n) {
            row = guessed[i];
            taken = drawn[row];
        } else if (i - n < room && i - n < found) {
            row = missed[i - n];
            taken = true;
        }
        pairs[2 * i] = row < 0 ? 0.0f : gpair[2 * row];
        pairs[2 * i + 1] = row < 0 ? 0.0f : gpair[2 * row + 1];
        page_drawn[i] = taken;
    }
}
