// The compiled-kernel trial's two kernels in C (benchmarks/compiled_kernel_trial.py describes
// them; compiled_kernel_numba.py holds the same in numba). Not part of jaxsvr.
#include <stdint.h>
#include <string.h>
#include <stdlib.h>

#define SLOTS 4096

static inline int64_t fold(int32_t b) {
    int64_t u = ((int64_t)(uint32_t)b) ^ 0x80000000LL;   // bits of -s
    u = (u == 0x80000000LL) ? 0 : u;                     // 0 - (+0.0) = +0.0
    int64_t c = u - ((u >> 31) << 32);                   // signed int32 value
    return c ^ ((c >> 63) & 0x7FFFFFFFLL);
}

static inline int64_t slot_of(uint32_t bits, int shift, uint64_t mask) {
    return (int64_t)((((uint64_t)bits * 0x9E3779B1ULL) & 0xFFFFFFFFULL) >> shift) & mask;
}

// s, r: [n, m] C-contiguous bits of S (int32) and R (uint32). Returns codes or -1 / -2.
int64_t build(const int32_t *s, const uint32_t *r, int64_t n, int64_t m, uint32_t *keys,
              int64_t *folded, uint32_t *rk, uint32_t *rg, uint8_t *rc, int64_t *rowptr,
              uint32_t *table, uint8_t *codes, int64_t n_codes) {
    int64_t nnz = 0;
    rowptr[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        const int32_t *si = s + i * m;
        const uint32_t *ri = r + i * m;
        uint32_t *ki = keys + i * m;
        int64_t lo = INT64_MAX, hi = INT64_MIN;
        for (int64_t j = 0; j < m; j++) {
            int64_t c = fold(si[j]);
            folded[j] = c;
            lo = c < lo ? c : lo;
            hi = c > hi ? c : hi;
        }
        if (hi - lo >= (1LL << 31)) return -1;
        for (int64_t j = 0; j < m; j++) {
            uint32_t g = ri[j];
            uint32_t flag = (g & 0x7FFFFFFFu) != 0;
            uint32_t k = ((uint32_t)((folded[j] - lo) << 1)) | flag;
            rk[nnz] = k;
            rg[nnz] = g;
            nnz += flag;
            ki[j] = k;
        }
        rowptr[i + 1] = nnz;
    }
    for (int64_t e = 0; e < nnz; e++) {
        int64_t sl = slot_of(rg[e], 20, SLOTS - 1);
        while (table[sl] != rg[e] && table[sl] != 0) sl = (sl + 1) & (SLOTS - 1);
        if (table[sl] == 0) {
            if (n_codes == 255) return -2;
            table[sl] = rg[e];
            codes[sl] = (uint8_t)n_codes++;
        }
        rc[e] = codes[sl];
    }
    return n_codes;
}

// keys [n, m] sorted rows; out_f [n, 7]; out_i [n, 6]. Returns the relevant items whose
// key another relevant item of the row has (equal similarity: not handled by the trial).
int64_t stats(const uint32_t *keys, int64_t n, int64_t m, const uint32_t *rk, const uint8_t *rc,
              const int64_t *rowptr, const double *value, const double *exp_value,
              const int64_t *order, int64_t n_codes, double threshold, const double *disc,
              const double *cum, double *out_f, int64_t *out_i) {
    int64_t size = 1, bits = 0;
    while (size < 2 * m) size <<= 1;
    while ((1LL << bits) < size) bits++;
    int shift = 32 - (int)bits;
    uint64_t mask = (uint64_t)size - 1;
    const uint32_t empty = 0xFFFFFFFFu;
    uint32_t *hkey = malloc(size * sizeof(uint32_t));
    uint8_t *hcode = malloc(size);
    int64_t *flagged = malloc((m + 1) * sizeof(int64_t));
    int64_t per_code[256] = {0};
    int64_t unhandled = 0;
    for (int64_t h = 0; h < size; h++) hkey[h] = empty;
    for (int64_t i = 0; i < n; i++) {
        int64_t a0 = rowptr[i], a1 = rowptr[i + 1], n_rel = a1 - a0;
        for (int64_t e = a0; e < a1; e++) {
            int64_t h = slot_of(rk[e], shift, mask);
            while (hkey[h] != empty && hkey[h] != rk[e]) h = (h + 1) & mask;
            if (hkey[h] == rk[e]) unhandled++;
            hkey[h] = rk[e];
            hcode[h] = rc[e];
        }
        const uint32_t *row = keys + i * m;
        int64_t count = 0;
        for (int64_t p = 0; p < m; p++) {
            flagged[count] = p;
            count += row[p] & 1;
        }
        int tied = 0;
        for (int64_t p = 1; p < m; p++) tied |= (row[p] ^ row[p - 1]) <= 1;
        double dcg = 0, dcg_exp = 0, dcg_nocut = 0, running = 0, ap_graded = 0, ap_binary = 0;
        int64_t n_one = 0, n_pos = 0, first = 0, last = 0;
        for (int64_t t = 0; t < n_rel; t++) {
            int64_t p = flagged[t];
            int64_t h = slot_of(row[p], shift, mask);
            while (hkey[h] != row[p]) h = (h + 1) & mask;
            int c = hcode[h];
            per_code[c]++;
            double g = value[c], d = disc[p];
            dcg_nocut += g * d;
            if (p < n_rel) {
                dcg += g * d;
                dcg_exp += exp_value[c] * d;
            }
            running += g;
            if (g == 1.0) {
                n_one++;
                ap_graded += running / (p + 1.0);
                ap_binary += n_one / (p + 1.0);
            }
            if (g >= threshold) {
                n_pos++;
                if (first == 0) first = p + 1;
                last = p + 1;
            }
        }
        double idcg = 0, idcg_exp = 0;
        int64_t a = 0;
        for (int64_t k = 0; k < n_codes; k++) {
            int64_t c = order[k];
            if (per_code[c]) {
                int64_t b = a + per_code[c];
                idcg += value[c] * (cum[b] - cum[a]);
                idcg_exp += exp_value[c] * (cum[b] - cum[a]);
                per_code[c] = 0;
                a = b;
            }
        }
        double *f = out_f + i * 7;
        f[0] = dcg; f[1] = dcg_exp; f[2] = dcg_nocut; f[3] = idcg; f[4] = idcg_exp;
        f[5] = ap_graded; f[6] = ap_binary;
        int64_t *o = out_i + i * 6;
        o[0] = n_rel; o[1] = n_one; o[2] = n_pos; o[3] = first; o[4] = last; o[5] = tied;
        for (int64_t e = a0; e < a1; e++) {
            int64_t h = slot_of(rk[e], shift, mask);
            while (hkey[h] != empty) { hkey[h] = empty; h = (h + 1) & mask; }
        }
    }
    free(hkey); free(hcode); free(flagged);
    return unhandled;
}
