/* TensorBoard event files, written without TensorFlow or a protobuf library:
 * TFRecord framing (masked CRC32C), hand-encoded Event/Summary protobufs, and
 * the histogram bucketing PyTorch's SummaryWriter does. Plain C; the Lua
 * binding is src/lua/ltb.c. Every call returns a status and leaves a message. */
#ifndef TENSH_TBEVENTS_H
#define TENSH_TBEVENTS_H

#include "core/tensh.h"

/* CRC32C (Castagnoli, reflected 0x82F63B78); start with crc = 0.
 * ts_crc32c(0, "123456789", 9) == 0xE3069283. */
uint32_t ts_crc32c(uint32_t crc, const void *data, size_t n);
/* TFRecord's masked form: ((crc >> 15) | (crc << 17)) + 0xa282ead8 */
uint32_t ts_crc32c_masked(const void *data, size_t n);

/* Seconds since the Unix epoch, with microseconds: an Event's wall_time. */
double ts_tb_now(void);

/* ---- histograms ------------------------------------------------------- */

typedef enum ts_tb_bins_kind {
  TS_TB_BINS_TENSORFLOW, /* TensorBoard's default: +-1e-12 * 1.1^k up to 1e20, and 0 */
  TS_TB_BINS_COUNT,      /* n equal bins over [min, max] (numpy's bins=n) */
  TS_TB_BINS_AUTO,       /* numpy's 'auto': the narrower of 'fd' and 'sturges' */
  TS_TB_BINS_FD,         /* Freedman-Diaconis: width 2 IQR / n^(1/3) */
  TS_TB_BINS_STURGES,    /* log2(n) + 1 bins */
  TS_TB_BINS_SQRT,       /* sqrt(n) bins */
  TS_TB_BINS_EDGES,      /* the given increasing edges (numpy's bins=sequence) */
} ts_tb_bins_kind;

#define TS_TB_MAX_BINS 1000000 /* more than TensorBoard can draw; guards a runaway 'fd' */

typedef struct ts_tb_bins {
  ts_tb_bins_kind kind;
  int64_t n;            /* COUNT: the number of bins; EDGES: the number of edges */
  const double *edges;  /* (n,) EDGES only, strictly increasing */
} ts_tb_bins;

/* A HistogramProto's content: bucket[i] counts the values in the bin whose
 * right edge is bucket_limit[i]; bucket[0] is an empty bin whose right edge is
 * the left edge of the first non-empty bin (as PyTorch writes them). */
typedef struct ts_tb_histogram {
  double min, max, num, sum, sum_squares;
  int64_t nbuckets;
  double *bucket_limit; /* (nbuckets,) */
  double *bucket;       /* (nbuckets,) */
} ts_tb_histogram;

/* Buckets x (n values, all finite, n >= 1) as numpy.histogram(x, bins) does,
 * then trims empty buckets at both ends. Free with ts_tb_histogram_free. */
ts_status ts_tb_histogram_make(const double *x, int64_t n, const ts_tb_bins *bins, ts_tb_histogram *out);
void ts_tb_histogram_free(ts_tb_histogram *h);

/* ---- the writer ------------------------------------------------------- */

typedef struct ts_tb_writer ts_tb_writer;

/* Creates logdir (like mkdir -p) and a new event file in it, named
 * events.out.tfevents.<unix time>.<hostname>.<pid>.<counter>, whose first
 * record carries file_version "brain.Event:2". Writes are buffered; they reach
 * the file on flush, on close, when the buffer fills, or when an add finds
 * flush_secs passed since the last flush (flush_secs <= 0: never by time). */
ts_status ts_tb_writer_open(const char *logdir, double flush_secs, ts_tb_writer **out);
const char *ts_tb_writer_path(const ts_tb_writer *w);   /* the event file */
const char *ts_tb_writer_logdir(const ts_tb_writer *w);

ts_status ts_tb_add_scalar(ts_tb_writer *w, const char *tag, double value, int64_t step, double walltime);
/* As PyTorch: each key k goes to its own event file under
 * logdir/<main_tag with '/' as '_'>_<k>/, as a scalar tagged main_tag. */
ts_status ts_tb_add_scalars(ts_tb_writer *w, const char *main_tag, int n, const char *const *keys,
                            const double *values, int64_t step, double walltime);
ts_status ts_tb_add_histogram(ts_tb_writer *w, const char *tag, const ts_tb_histogram *h, int64_t step,
                              double walltime);
/* The text plugin's summary: tag "<tag>/text_summary" as PyTorch writes it, a
 * DT_STRING tensor of shape (1,) holding the len bytes of text. */
ts_status ts_tb_add_text(ts_tb_writer *w, const char *tag, const char *text, size_t len, int64_t step,
                         double walltime);

/* An image summary as PyTorch's add_image writes it: Summary.Value.image
 * {height, width, colorspace (channels), encoded_image_string (a PNG)}. */
ts_status ts_tb_add_image(ts_tb_writer *w, const char *tag, const uint8_t *png, size_t len, int64_t height,
                          int64_t width, int channels, int64_t step, double walltime);

ts_status ts_tb_writer_flush(ts_tb_writer *w);
/* Flushes and closes the files (its add_scalars children too) and frees w,
 * even on failure; returns the first I/O error. */
ts_status ts_tb_writer_close(ts_tb_writer *w);

#endif
