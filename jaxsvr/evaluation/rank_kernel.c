/* The NumPy engine's compiled kernel (jaxsvr/evaluation/compiled_kernel.py loads it).

Two passes over a block of queries [n, m] (rows contiguous), around NumPy's own row sort of
the keys; they replace the NumPy passes of the 32-bit path (narrow_keys.py) and the sparse
statistics (query_stats.py) and give the same statistics bit for bit:

- build: each similarity's 32-bit key (descending similarity, shifted left by one, the low
  bit set where R != 0; per row, offset by the row's smallest) in one vectorised pass; the
  row's relevant entries (key, gain bits, gain code) from bit masks of R != 0. Codes number
  the block's distinct gains (at most 255) through a small hash table of their bits.
- stats: per row of sorted keys, the flagged positions (the relevant items' ranks) from
  bit masks; each one's gain from a hash of the row's relevant keys (relevant items of
  equal similarity take their gains in ascending order: the tie rule of query_stats.py);
  every QueryStats field from the same float64 terms the NumPy code forms, summed in
  NumPy's order: np.add.reduceat over a segment is a[0] + pairwise_sum(a[1:])
  (segment_sum below), and the running sums of the AP numerator come from one sequential
  float64 sum over the block's entries (np.cumsum). No FMA contraction: build with
  -ffp-contract=off.

Text-to-video blocks are columns of S and R; jaxsvr_transposed copies them into rows first.
Bit masks and transposes use AVX2 where the CPU has it (checked at run time), and plain C
one item at a time elsewhere; jaxsvr_set_simd(0) forces the latter (tests).

Built by setup.py as an optional extension (no Python API: called through ctypes, which
releases the GIL, so blocks run on several threads). C99 with GCC/Clang builtins for the
AVX2 paths, no dependencies. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define KERNEL_VERSION 3 /* compiled_kernel.py refuses a library of another version */
#define GAIN_SLOTS 4096  /* hash slots of a block's distinct gain bits */
#define MAX_CODES 255
#define PW_BLOCKSIZE 128 /* NumPy's pairwise summation */

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define AVX2_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define AVX2_CLONES
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_AVX2_PATH 1 /* AVX2 masks and transposes where the CPU has it (run time) */
#include <immintrin.h>
#endif

int64_t jaxsvr_rank_kernel_version(void) { return KERNEL_VERSION; }

static inline uint32_t hash_slot(uint32_t bits, int shift) {
    return (uint32_t)(bits * 0x9E3779B1u) >> shift; /* Fibonacci hashing: the top bits */
}

/* Signed-monotone bits of 0 - s (ascending = descending similarity); 0 - (+-0.0) = +0.0. */
static inline int32_t folded(uint32_t s) {
    uint32_t neg = (s & 0x7FFFFFFFu) ? s ^ 0x80000000u : 0u;
    int32_t c = (int32_t)neg;
    return c ^ ((c >> 31) & 0x7FFFFFFF);
}

/* Positions p < m whose flag (row[p] & mask) is set, written to out (m + 1 slots) in
   order; returns how many. Branch-free one item at a time, or 32 at a time from AVX2 bit
   masks (a set bit per flagged item, about one in ten at EK-100). */
static int64_t flagged_scalar(const uint32_t *row, int64_t p, int64_t m, uint32_t mask,
                              int64_t *out, int64_t count) { /* from position p, count so far */
    for (; p < m; p++) {
        out[count] = p;
        count += (row[p] & mask) != 0;
    }
    return count;
}

#ifdef HAVE_AVX2_PATH
__attribute__((target("avx2"))) static int64_t flagged_avx2(const uint32_t *row, int64_t m,
                                                             uint32_t mask, int64_t *out) {
    const __m256i bits = _mm256_set1_epi32((int)mask), zero = _mm256_setzero_si256();
    int64_t count = 0, p = 0;
    for (; p + 32 <= m; p += 32) {
        uint32_t set = 0;
        for (int k = 0; k < 4; k++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(row + p + 8 * k));
            __m256i none = _mm256_cmpeq_epi32(_mm256_and_si256(v, bits), zero);
            set |= (uint32_t)(~_mm256_movemask_ps(_mm256_castsi256_ps(none)) & 0xFF) << (8 * k);
        }
        for (; set; set &= set - 1) out[count++] = p + __builtin_ctz(set);
    }
    return flagged_scalar(row, p, m, mask, out, count);
}
#endif

static int simd = 1; /* 0: the portable paths even where the CPU has AVX2 (tests) */

static int use_avx2(void) {
#ifdef HAVE_AVX2_PATH
    static int cpu_avx2 = -1; /* whether the CPU has AVX2, asked once */
    if (cpu_avx2 < 0) { /* threads racing here all write the same answer */
        __builtin_cpu_init();
        cpu_avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
    }
    return simd && cpu_avx2;
#else
    return 0;
#endif
}

/* Turns the AVX2 paths off (0) or back on where the CPU has AVX2 (1): for tests of the
   portable paths; not while blocks are being ranked. Returns whether AVX2 is taken now. */
int64_t jaxsvr_set_simd(int64_t on) {
    simd = on != 0;
    return use_avx2();
}

static int64_t flagged_positions(const uint32_t *row, int64_t m, uint32_t mask, int64_t *out) {
#ifdef HAVE_AVX2_PATH
    if (use_avx2()) return flagged_avx2(row, m, mask, out);
#endif
    return flagged_scalar(row, 0, m, mask, out, 0);
}

/* dst [n, m] = the n columns of src over m rows (src row-major, ld elements a row):
   dst[i * m + j] = src[j * ld + i], bits as they are. The text-to-video blocks' copies:
   their queries are columns of S and R. 8 x 8 tiles transposed in AVX2 registers where
   the CPU has them, 16-item tiles one at a time otherwise. */
static void transposed_scalar(const uint32_t *src, int64_t ld, int64_t n, int64_t m,
                              uint32_t *dst, int64_t i0, int64_t j0) {
    for (int64_t jt = j0; jt < m; jt += 16) { /* the rest: columns from i0, rows from j0 */
        const int64_t jend = jt + 16 < m ? jt + 16 : m;
        for (int64_t i = i0; i < n; i++)
            for (int64_t j = jt; j < jend; j++) dst[i * m + j] = src[j * ld + i];
    }
}

#ifdef HAVE_AVX2_PATH
__attribute__((target("avx2"))) static void transposed_avx2(const uint32_t *src, int64_t ld,
                                                             int64_t n, int64_t m,
                                                             uint32_t *dst) {
    const int64_t n8 = n - n % 8, m8 = m - m % 8;
    for (int64_t j = 0; j < m8; j += 8) {
        for (int64_t i = 0; i < n8; i += 8) {
            __m256 r[8], t[8], u[8];
            for (int k = 0; k < 8; k++) r[k] = _mm256_loadu_ps((const float *)src + (j + k) * ld + i);
            for (int k = 0; k < 8; k += 2) {
                t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
                t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
            }
            for (int k = 0; k < 8; k += 4) {
                u[k] = _mm256_shuffle_ps(t[k], t[k + 2], 0x44);
                u[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], 0xEE);
                u[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0x44);
                u[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0xEE);
            }
            for (int k = 0; k < 4; k++) {
                _mm256_storeu_ps((float *)dst + (i + k) * m + j,
                                 _mm256_permute2f128_ps(u[k], u[k + 4], 0x20));
                _mm256_storeu_ps((float *)dst + (i + k + 4) * m + j,
                                 _mm256_permute2f128_ps(u[k], u[k + 4], 0x31));
            }
        }
        for (int64_t i = n8; i < n; i++)
            for (int64_t k = 0; k < 8; k++) dst[i * m + j + k] = src[(j + k) * ld + i];
    }
    transposed_scalar(src, ld, n, m, dst, 0, m8);
}
#endif

void jaxsvr_transposed(const uint32_t *src, int64_t ld, int64_t n, int64_t m, uint32_t *dst) {
#ifdef HAVE_AVX2_PATH
    if (use_avx2()) {
        transposed_avx2(src, ld, n, m, dst);
        return;
    }
#endif
    transposed_scalar(src, ld, n, m, dst, 0, 0);
}

/* s, r: [n, m] bits of the block's similarities (finite) and relevance. Writes keys [n, m],
   the relevant entries rk (keys), rg (gain bits), rc (gain codes) grouped by row with
   row_ptr [n + 1], and the block's gain table (table: bits by slot, codes: code by slot;
   both reset here). Returns the number of codes, -1 where a row's keys span 2^31 values or
   more, -2 where the block has more than MAX_CODES distinct gains, -3 without memory. */
AVX2_CLONES
int64_t jaxsvr_build(const uint32_t *s, const uint32_t *r, int64_t n, int64_t m,
                     uint32_t *keys, uint32_t *rk, uint32_t *rg, uint8_t *rc, int64_t *row_ptr,
                     uint32_t *table, uint8_t *codes) {
    int64_t nnz = 0, n_codes = 0;
    int64_t *relevant = malloc((m + 1) * sizeof(int64_t));
    if (!relevant) return -3;
    row_ptr[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        const uint32_t *si = s + i * m, *ri = r + i * m;
        uint32_t *ki = keys + i * m;
        int32_t lo = INT32_MAX, hi = INT32_MIN;
        for (int64_t j = 0; j < m; j++) {
            int32_t c = folded(si[j]);
            lo = c < lo ? c : lo;
            hi = c > hi ? c : hi;
        }
        if ((int64_t)hi - (int64_t)lo >= ((int64_t)1 << 31)) {
            free(relevant);
            return -1;
        }
        for (int64_t j = 0; j < m; j++) { /* no stores but the keys': vectorised */
            uint32_t flag = (ri[j] & 0x7FFFFFFFu) != 0;
            ki[j] = ((uint32_t)((int64_t)folded(si[j]) - lo) << 1) | flag;
        }
        const int64_t k = flagged_positions(ri, m, 0x7FFFFFFFu, relevant);
        for (int64_t e = 0; e < k; e++) {
            rk[nnz + e] = ki[relevant[e]];
            rg[nnz + e] = ri[relevant[e]];
        }
        nnz += k;
        row_ptr[i + 1] = nnz;
    }
    free(relevant);
    memset(table, 0, GAIN_SLOTS * sizeof(uint32_t)); /* 0: free (a relevant gain has bits) */
    for (int64_t e = 0; e < nnz; e++) {
        uint32_t slot = hash_slot(rg[e], 20);
        while (table[slot] != rg[e] && table[slot] != 0) slot = (slot + 1) & (GAIN_SLOTS - 1);
        if (table[slot] == 0) {
            if (n_codes == MAX_CODES) return -2;
            table[slot] = rg[e];
            codes[slot] = (uint8_t)n_codes++;
        }
        rc[e] = codes[slot];
    }
    return n_codes;
}

/* NumPy's pairwise summation of n doubles (numpy/_core/src/umath/loops_utils.h.src). */
static double pairwise_sum(const double *a, int64_t n) {
    if (n < 8) {
        double res = 0.;
        for (int64_t i = 0; i < n; i++) res += a[i];
        return res;
    }
    if (n <= PW_BLOCKSIZE) {
        double r[8];
        int64_t i;
        for (int j = 0; j < 8; j++) r[j] = a[j];
        for (i = 8; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++) r[j] += a[i + j];
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) res += a[i];
        return res;
    }
    int64_t n2 = n / 2;
    n2 -= n2 % 8;
    return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
}

/* The sum np.add.reduceat gives a segment of n values: the first, plus the rest's pairwise
   sum (0.0 for an empty segment). */
static inline double segment_sum(const double *a, int64_t n) {
    return n ? a[0] + pairwise_sum(a + 1, n - 1) : 0.0;
}

/* A slot of the per-row hash of the relevant keys (8 bytes: a row's table stays in L1):
   key 0 is a free slot (a relevant item's key is odd); equal keys (relevant items of equal
   similarity) share a slot, their entries chained through `next` from `first`. */
typedef struct {
    uint32_t key;
    int32_t first;
} KeySlot;

typedef struct {
    KeySlot *slots;
    int32_t *next;
    uint32_t mask; /* per row: at least 4 slots per relevant item, a power of two */
    int shift;
} KeyHash;

static inline void size_for(KeyHash *h, int64_t n_rel) {
    int bits = 4;
    while (((int64_t)1 << bits) < 4 * n_rel) bits++;
    h->mask = ((uint32_t)1 << bits) - 1, h->shift = 32 - bits;
}

static inline KeySlot *key_slot(const KeyHash *h, uint32_t key) {
    uint32_t slot = hash_slot(key, h->shift);
    while (h->slots[slot].key != key && h->slots[slot].key != 0) slot = (slot + 1) & h->mask;
    return h->slots + slot;
}

/* keys: [n, m] with sorted rows (the output of jaxsvr_build, then sorted); rk, rc, row_ptr:
   from jaxsvr_build; value, exp_value [n_codes]: each code's gain r and 2^r - 1 in float64;
   order [n_codes]: the codes by descending gain; ones_only: positives are r = 1 (threshold
   1), else r >= threshold (threshold: a float32 value); disc [m], cum [m + 1]: discounts and
   their cumulative sums (query_stats.py). Writes out_f [n, 7] (dcg, dcg_exp, dcg_nocut,
   idcg, idcg_exp, ap_graded, ap_binary) and out_i [n, 6] (n_rel, n_one, n_pos, first_pos,
   last_pos, tied). Returns 0, or -1 where memory could not be had. */
int64_t jaxsvr_stats(const uint32_t *keys, int64_t n, int64_t m, const uint32_t *rk,
                     const uint8_t *rc, const int64_t *row_ptr, const double *value,
                     const double *exp_value, const int64_t *order, int64_t n_codes,
                     int64_t ones_only, double threshold, const double *disc, const double *cum,
                     double *out_f, int64_t *out_i) {
    KeyHash h;
    size_for(&h, m);
    const int64_t size = (int64_t)h.mask + 1; /* enough for any row */
    h.slots = malloc(size * sizeof(KeySlot));
    h.next = malloc((m + 1) * sizeof(int32_t));
    int64_t *flagged = malloc((m + 1) * sizeof(int64_t));
    uint8_t *group = malloc(m + 1);
    double *terms = malloc(7 * (m + 1) * sizeof(double));
    int64_t status = 0;
    if (!h.slots || !h.next || !flagged || !group || !terms) {
        status = -1;
        goto done;
    }
    double *nocut = terms, *cut = nocut + m + 1, *expo = cut + m + 1, *graded = expo + m + 1;
    double *binary = graded + m + 1, *ideal = binary + m + 1, *ideal_exp = ideal + m + 1;
    /* entries per code, counted in two halves (even and odd ranks): consecutive entries of
       one gain would otherwise wait on each other's increment */
    int64_t per_code[2][MAX_CODES + 1] = {{0}}, in_group[MAX_CODES + 1] = {0};
    double total = 0.0; /* running float64 sum of the block's gains in rank order (np.cumsum) */

    for (int64_t i = 0; i < n; i++) {
        const int64_t a0 = row_ptr[i], n_rel = row_ptr[i + 1] - a0;
        size_for(&h, n_rel);
        memset(h.slots, 0, ((size_t)h.mask + 1) * sizeof(KeySlot));
        for (int32_t e = 0; e < n_rel; e++) {
            const uint32_t key = rk[a0 + e];
            KeySlot *slot = key_slot(&h, key);
            h.next[e] = slot->key ? slot->first : -1; /* a tie: chained in front */
            slot->key = key, slot->first = e;
        }
        const uint32_t *row = keys + i * m;
        flagged_positions(row, m, 1u, flagged); /* the relevant items' ranks */
        int64_t tied = 0;
        for (int64_t p = 1; p < m; p++) tied |= (row[p] ^ row[p - 1]) <= 1u;

        const double base = total;
        int64_t n_one = 0, n_pos = 0, first_pos = 0, last_pos = 0, left = 0, next_code = 0;
        for (int64_t t = 0; t < n_rel; t++) {
            const int64_t p = flagged[t];
            int code;
            if (left) { /* within a run of relevant items of equal similarity */
                code = group[next_code++];
                left--;
            } else {
                const KeySlot *slot = key_slot(&h, row[p]);
                if (h.next[slot->first] < 0) {
                    code = rc[a0 + slot->first];
                } else { /* their gains in ascending order: sorted, or counted by code */
                    int64_t g = 0;
                    for (int32_t e = slot->first; e >= 0; e = h.next[e]) group[g++] = rc[a0 + e];
                    if (g <= 16) {
                        for (int64_t x = 1; x < g; x++)
                            for (int64_t y = x; y && value[group[y]] < value[group[y - 1]]; y--) {
                                uint8_t swap = group[y];
                                group[y] = group[y - 1], group[y - 1] = swap;
                            }
                    } else {
                        for (int64_t x = 0; x < g; x++) in_group[group[x]]++;
                        g = 0;
                        for (int64_t k = n_codes - 1; k >= 0; k--)
                            for (; in_group[order[k]]; in_group[order[k]]--) group[g++] = order[k];
                    }
                    code = group[0];
                    next_code = 1;
                    left = g - 1;
                }
            }
            per_code[t & 1][code]++;
            const double gain = value[code], d = disc[p];
            nocut[t] = gain * d;
            cut[t] = p < n_rel ? nocut[t] : 0.0;
            expo[t] = p < n_rel ? exp_value[code] * d : 0.0;
            total += gain;
            if (gain == 1.0) {
                const double inv_rank = 1.0 / ((double)p + 1.0);
                graded[n_one] = (total - base) * inv_rank;
                binary[n_one] = (double)(n_one + 1) * inv_rank;
                n_one++;
            }
            if (ones_only ? gain == 1.0 : gain >= threshold) {
                n_pos++;
                if (!first_pos) first_pos = p + 1;
                last_pos = p + 1;
            }
        }
        /* The ideal ranking: runs of equal gain, descending; a run over [a, b) adds
           gain * (cum[b] - cum[a]). */
        int64_t runs = 0, a = 0;
        for (int64_t k = 0; k < n_codes; k++) {
            const int64_t code = order[k];
            const int64_t run = per_code[0][code] + per_code[1][code];
            if (!run) continue;
            const int64_t b = a + run;
            const double span = cum[b] - cum[a];
            ideal[runs] = value[code] * span;
            ideal_exp[runs] = exp_value[code] * span;
            runs++;
            per_code[0][code] = per_code[1][code] = 0;
            a = b;
        }
        double *f = out_f + i * 7;
        f[0] = segment_sum(cut, n_rel);
        f[1] = segment_sum(expo, n_rel);
        f[2] = segment_sum(nocut, n_rel);
        f[3] = segment_sum(ideal, runs);
        f[4] = segment_sum(ideal_exp, runs);
        f[5] = segment_sum(graded, n_one);
        f[6] = segment_sum(binary, n_one);
        int64_t *o = out_i + i * 6;
        o[0] = n_rel, o[1] = n_one, o[2] = n_pos, o[3] = first_pos, o[4] = last_pos;
        o[5] = tied;
    }
done:
    free(h.slots), free(h.next);
    free(flagged), free(group), free(terms);
    return status;
}
