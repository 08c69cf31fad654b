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

// What a paged grower reads of a tree's sample before its tree, first counted in `totals`
// (zeroed before; twin: cpu.sample_sizes): the rows drawn, those of them `gathered` (may be
// null) misses, each written to `missed`, then each page's rows that `likely` (may be null)
// takes, pages ending at `page_ends` (ascending, the last n). A thread counts in registers,
// adding its run of a page's likely rows when its rows pass into a later page; each block
// adds its totals once. Page counts are the block's in shared memory where `shared_pages`,
// else added to `totals` directly (too many pages for shared memory).
extern "C" __global__ void sample_counts(const bool* __restrict__ drawn, const bool* __restrict__ gathered,
                                         const bool* __restrict__ likely, const i64 n,
                                         const i64* __restrict__ page_ends, const int n_pages,
                                         const int shared_pages, bool* __restrict__ missed, u64* __restrict__ totals)
{
    extern __shared__ u64 block_totals[];  // drawn, missed, then each page's likely rows where shared
    const int n_shared = shared_pages ? 2 + n_pages : 2;
    for (int k = threadIdx.x; k < n_shared; k += blockDim.x) block_totals[k] = 0;
    __syncthreads();
    u64* page_totals = shared_pages ? block_totals + 2 : totals + 2;
    u64 n_drawn = 0, n_missed = 0, run = 0;
    int page = 0;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        const bool is_drawn = drawn[i];
        n_drawn += is_drawn;
        if (gathered != nullptr) {
            const bool is_missed = is_drawn && !gathered[i];
            missed[i] = is_missed;
            n_missed += is_missed;
        }
        if (likely != nullptr && likely[i]) {
            if (i >= page_ends[page]) {  // a thread's rows ascend: its page only moves on
                if (run) atomicAdd(page_totals + page, run);
                run = 0;
                while (i >= page_ends[page]) ++page;
            }
            ++run;
        }
    }
    if (run) atomicAdd(page_totals + page, run);
    atomicAdd(block_totals, n_drawn);
    atomicAdd(block_totals + 1, n_missed);
    __syncthreads();
    for (int k = threadIdx.x; k < n_shared; k += blockDim.x)
        if (block_totals[k]) atomicAdd(totals + k, block_totals[k]);
}

// sizes = [drawn, missed, 0, likely's rows through each page's end, then how far each limit is
// passed: missed - room, drawn * per_row - budget, needed * per_row - budget, needed - capacity,
// where needed = the rows likely takes, a 64th of them and 64 more: cpu.ahead_room]. One thread.
extern "C" __global__ void sample_sizes(const u64* __restrict__ totals, const int n_pages, const i64 room,
                                        const i64 per_row, const i64 budget, const i64 capacity,
                                        i64* __restrict__ sizes)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    const i64 n_drawn = (i64)totals[0], n_missed = (i64)totals[1];
    sizes[0] = n_drawn;
    sizes[1] = n_missed;
    sizes[2] = 0;
    i64 through = 0;
    for (int p = 0; p < n_pages; ++p) {
        through += (i64)totals[2 + p];
        sizes[3 + p] = through;
    }
    const i64 needed = through + through / 64 + 64;
    i64* passed = sizes + 3 + n_pages;
    passed[0] = n_missed - room;
    passed[1] = n_drawn * per_row - budget;
    passed[2] = needed * per_row - budget;
    passed[3] = needed - capacity;
}
