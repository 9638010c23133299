/* Checkpoint files in the safetensors format (github.com/huggingface/safetensors):
 *
 *   8 bytes   N, the header length, little-endian uint64
 *   N bytes   a JSON object, padded with spaces to a multiple of 8:
 *             {"__metadata__": {"k": "v", ...},
 *              "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
 *   the rest  the tensors' bytes, little-endian, each contiguous; offsets count
 *             from the first byte after the header and cover the rest exactly.
 *
 * The core half of torch.save/torch.load: it writes a list of named CPU
 * tensors plus string metadata atomically, and parses a file with every bound
 * checked before a byte of tensor data is read. How Lua values map onto names
 * and metadata is the binding's business (src/lua/lsave.c). */
#ifndef TENSH_SAFETENSORS_H
#define TENSH_SAFETENSORS_H

#include <stdio.h>

#include "core/tensh.h"

/* The reference implementation's limit: a larger header is a corrupt file. */
#define TS_SAFETENSORS_MAX_HEADER 100000000

/* One tensor as the header describes it. */
typedef struct ts_safetensors_entry {
  char *name;
  ts_dtype dtype;
  int ndim;
  int64_t sizes[TS_MAX_DIMS];
  int64_t begin, end; /* byte offsets into the data buffer: [begin, end) */
} ts_safetensors_entry;

/* An open, validated file. Entries are in data order (ascending begin). */
typedef struct ts_safetensors {
  FILE *f;                       /* NULL when only a header was parsed */
  char *path;                    /* for messages */
  int64_t data_start;            /* 8 + N */
  int64_t data_size;             /* bytes after the header */
  int n;
  ts_safetensors_entry *entries; /* (n) */
  int nmeta;
  char **meta_keys, **meta_values; /* (nmeta) the __metadata__ strings, in file order */
} ts_safetensors;

/* Opens path and validates its header; the data is not read yet. Errors name
 * the file and the problem ("torch.load: cannot open 'x': No such file ..."). */
ts_status ts_safetensors_open(const char *path, ts_safetensors **out);
/* Parses and validates a header of n bytes (not NUL-terminated) for a data
 * buffer of data_size bytes into a fresh handle with no file; `path` names it
 * in messages. ts_safetensors_open's second half, exposed for tests. */
ts_status ts_safetensors_parse(const char *path, const char *header, size_t n, int64_t data_size,
                               ts_safetensors **out);
/* Reads entry i into a new contiguous CPU tensor (fread straight into its storage). */
ts_status ts_safetensors_read(ts_safetensors *sf, int i, ts_tensor **out);
void ts_safetensors_close(ts_safetensors *sf);

/* The dtype code of the format ("F32", "BF16", "BOOL"), and back. */
const char *ts_safetensors_dtype_code(ts_dtype dt);
bool ts_safetensors_dtype_parse(const char *code, ts_dtype *out);

/* Whether s[0, n) is UTF-8 (no overlong forms, surrogates or values past U+10FFFF). */
bool ts_utf8_valid(const char *s, size_t n);

/* Writes n named CPU tensors (any strides: their logical values are written)
 * and nmeta metadata strings to path, atomically: a temp file
 * `path.tmp.<pid>` beside it is written, flushed, fsynced and renamed over
 * path, then the directory is fsynced. On any error the temp file is removed
 * and an existing file at path is left untouched. Names must be distinct,
 * valid UTF-8; the tensors are laid out by alignment (larger items first),
 * then by name, as the reference implementation does. */
ts_status ts_safetensors_save(const char *path, int n, const char *const *names, ts_tensor *const *tensors,
                              int nmeta, const char *const *meta_keys, const char *const *meta_values);
/* The header save would write (JSON plus padding, without the 8-byte length),
 * malloc'd into *out; for tests and for save itself. */
ts_status ts_safetensors_header(int n, const char *const *names, ts_tensor *const *tensors, int nmeta,
                                const char *const *meta_keys, const char *const *meta_values, char **out,
                                size_t *len);

#endif
