/* Build tool for the simulated device (make sim): rewrites a CUDA source so a
 * host C++ compiler accepts it, changing only what host C++ cannot spell.
 *
 *   k<T><<<grid, block, smem, stream>>>(a, b)
 *     -> ::tsim::launch(TSIM_SITE("k<T>"), ::tsim::config(grid, block, smem, stream),
 *                       [](auto... tsim_a) { k<T>(tsim_a...); }, a, b)
 *   __global__ void __launch_bounds__(N) k(...) {
 *     -> ... k(...) { TSIM_LAUNCH_BOUNDS(N);
 *
 * The arguments are evaluated at the launch, as CUDA does, and the kernel is
 * called once per simulated thread with its own copies. Newlines are kept
 * where they were and the output starts with a #line naming the source, so
 * compiler errors and backtraces point at the CUDA sources.
 * usage: simlaunch IN.cu OUT.cc */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *src;
static size_t len;

/* The index just past a comment, string or character literal starting at i,
 * or i itself when none starts there. */
static size_t skip_literal(size_t i) {
  if (src[i] == '/' && i + 1 < len && src[i + 1] == '/') {
    while (i < len && src[i] != '\n') i++;
    return i;
  }
  if (src[i] == '/' && i + 1 < len && src[i + 1] == '*') {
    char *end = strstr(src + i + 2, "*/");
    return end ? (size_t)(end - src) + 2 : len;
  }
  if (src[i] == '"' || src[i] == '\'') {
    char q = src[i++];
    while (i < len && src[i] != q) i += src[i] == '\\' ? 2 : 1;
    return i + 1;
  }
  return i;
}

/* The index of the bracket closing the one at `open` (skipping literals). */
static size_t match_forward(size_t open, char o, char c) {
  int depth = 0;
  for (size_t i = open; i < len;) {
    size_t j = skip_literal(i);
    if (j != i) { i = j; continue; }
    if (src[i] == o) depth++;
    else if (src[i] == c && --depth == 0) return i;
    i++;
  }
  return len;
}

static void die(const char *in, size_t at, const char *what) {
  int line = 1;
  for (size_t i = 0; i < at && i < len; i++) line += src[i] == '\n';
  fprintf(stderr, "%s:%d: simlaunch: %s\n", in, line, what);
  exit(1);
}

static void put(FILE *out, size_t from, size_t to) { fwrite(src + from, 1, to - from, out); }

/* Start of the kernel expression ending just before `end` (a name with
 * optional template arguments and namespace qualifiers). */
static size_t kernel_start(size_t end) {
  size_t i = end;
  while (i > 0 && isspace((unsigned char)src[i - 1])) i--;
  if (i > 0 && src[i - 1] == '>') { /* template arguments: back to the matching '<' */
    int depth = 0;
    while (i > 0) {
      char ch = src[--i];
      if (ch == '>') depth++;
      else if (ch == '<' && --depth == 0) break;
    }
  }
  while (i > 0 && (isalnum((unsigned char)src[i - 1]) || src[i - 1] == '_' || src[i - 1] == ':')) i--;
  return i;
}

int main(int argc, char **argv) {
  if (argc != 3) return fprintf(stderr, "usage: simlaunch IN.cu OUT.cc\n"), 2;
  FILE *in = fopen(argv[1], "rb");
  if (!in) return perror(argv[1]), 1;
  fseek(in, 0, SEEK_END);
  len = (size_t)ftell(in);
  fseek(in, 0, SEEK_SET);
  char *buf = malloc(len + 1);
  if (!buf || fread(buf, 1, len, in) != len) return perror(argv[1]), 1;
  buf[len] = 0;
  fclose(in);
  src = buf;

  FILE *out = fopen(argv[2], "w");
  if (!out) return perror(argv[2]), 1;
  fprintf(out, "#line 1 \"%s\"\n", argv[1]);
  size_t done = 0; /* src[0, done) is written */
  for (size_t i = 0; i < len;) {
    size_t j = skip_literal(i);
    if (j != i) { i = j; continue; }
    if (!strncmp(src + i, "<<<", 3)) {
      size_t k0 = kernel_start(i);
      size_t cfg = i + 3;
      char *close = strstr(src + cfg, ">>>");
      if (!close) die(argv[1], i, "<<< without >>>");
      size_t cfg_end = (size_t)(close - src), p = cfg_end + 3;
      while (p < len && isspace((unsigned char)src[p])) p++;
      if (p >= len || src[p] != '(') die(argv[1], i, "expected '(' after >>>");
      size_t args_end = match_forward(p, '(', ')');
      if (args_end >= len) die(argv[1], p, "unbalanced parentheses in a kernel launch");
      bool has_args = false;
      for (size_t q = p + 1; q < args_end; q++) has_args |= !isspace((unsigned char)src[q]);
      put(out, done, k0);
      fputs("::tsim::launch(TSIM_SITE(\"", out);
      for (size_t q = k0; q < i; q++)
        if (!isspace((unsigned char)src[q]) && src[q] != '"') fputc(src[q], out);
      fputs("\"), ::tsim::config(", out);
      put(out, cfg, cfg_end);
      fputs("), [](auto... tsim_a) { ", out);
      put(out, k0, i);
      fputs("(tsim_a...); }", out);
      if (has_args) fputs(", ", out);
      put(out, p + 1, args_end + 1); /* the arguments and the closing parenthesis */
      done = i = args_end + 1;
      continue;
    }
    if (!strncmp(src + i, "__launch_bounds__", 17) && (i == 0 || !isalnum((unsigned char)src[i - 1]))) {
      size_t p = i + 17;
      while (p < len && isspace((unsigned char)src[p])) p++;
      if (p >= len || src[p] != '(') { i += 17; continue; } /* a #define of it, say */
      size_t arg_end = match_forward(p, '(', ')');
      /* the body's '{' after the parameter list, unless this is a declaration */
      size_t b = arg_end + 1;
      while (b < len && src[b] != '{' && src[b] != ';') {
        size_t j2 = skip_literal(b);
        b = j2 != b ? j2 : b + 1;
      }
      if (b >= len || src[b] == ';') { i = arg_end + 1; continue; }
      put(out, done, b + 1);
      fputs(" TSIM_LAUNCH_BOUNDS", out);
      put(out, p, arg_end + 1);
      fputs(";", out);
      done = i = b + 1;
      continue;
    }
    i++;
  }
  put(out, done, len);
  if (fclose(out)) return perror(argv[2]), 1;
  free(buf);
  return 0;
}
