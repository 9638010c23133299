/* Build tool for the simulated device (make sim): rewrites a CUDA source so a
 * host C++ compiler accepts it, changing only what host C++ cannot spell.
 *
 *   k<T><<<grid, block, smem, stream>>>(a, b)
 *     -> ::tsim::launch(TSIM_SITE("k<T>"), ::tsim::config(grid, block, smem, stream),
 *                       [](auto... tsim_a) { k<T>(tsim_a...); }, a, b)
 *   __global__ void __launch_bounds__(N) k(...) {
 *     -> ... k(...) { TSIM_LAUNCH_BOUNDS(N);
 *   __shared__ T a[N][M], b;
 *     -> static char tsim_sk1[2]; T (&a)[N][M] = ::tsim::shared_var<TSIM_REF(a)>(tsim_sk1 + 0),
 *                                   (&b) = ::tsim::shared_var<TSIM_REF(b)>(tsim_sk1 + 1);
 *
 * __shared__ variables become references into the block's shared memory
 * (sim/exec.cc places them, poisoned, when a block starts), so every block
 * sees its own and the access checks know them for shared memory. The key
 * (a static local) tells declarations apart, per template instance too.
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

static bool is_ident(char c) { return isalnum((unsigned char)c) || c == '_'; }

/* The end of the statement starting at i: its ';' outside brackets. */
static size_t statement_end(size_t i) {
  int depth = 0;
  while (i < len) {
    size_t j = skip_literal(i);
    if (j != i) { i = j; continue; }
    char c = src[i];
    if (c == '(' || c == '[' || c == '{') depth++;
    else if (c == ')' || c == ']' || c == '}') depth--;
    else if (c == ';' && depth == 0) return i;
    i++;
  }
  return len;
}

/* The declarators of `__shared__ T d1, d2;` in [from, to): the commas that
 * separate them (outside (), [] and template <>), at most 16. */
static int split_declarators(size_t from, size_t to, size_t *cut, int max) {
  int n = 0, paren = 0, angle = 0;
  for (size_t i = from; i < to;) {
    size_t j = skip_literal(i);
    if (j != i) { i = j; continue; }
    char c = src[i];
    if (c == '(' || c == '[') paren++;
    else if (c == ')' || c == ']') paren--;
    else if (paren == 0 && c == '<') angle++;
    else if (paren == 0 && c == '>' && angle > 0) angle--;
    else if (paren == 0 && angle == 0 && c == ',' && n < max) cut[n++] = i;
    i++;
  }
  return n;
}

/* The declared name in a declarator [from, to): the identifier before its
 * first '[' outside parentheses, else its last identifier. */
static void declarator_name(size_t from, size_t to, size_t *name, size_t *name_end) {
  size_t end = to;
  int paren = 0;
  for (size_t i = from; i < to; i++) {
    if (src[i] == '(') paren++;
    else if (src[i] == ')') paren--;
    else if (src[i] == '[' && paren == 0) { end = i; break; }
  }
  while (end > from && !is_ident(src[end - 1])) end--;
  size_t b = end;
  while (b > from && is_ident(src[b - 1])) b--;
  *name = b, *name_end = end;
}

/* Writes the rewritten `__shared__ ...;` whose text after the keyword is
 * [from, semi). Newlines stay where they were. */
static void rewrite_shared(FILE *out, const char *in, size_t from, size_t semi, int *keys) {
  size_t cut[17];
  int n = split_declarators(from, semi, cut, 16);
  cut[n] = semi;
  int key = ++*keys;
  fprintf(out, "static char tsim_sk%d[%d];", key, n + 1);
  size_t start = from;
  for (int d = 0; d <= n; d++) {
    size_t name, name_end;
    declarator_name(start, cut[d], &name, &name_end);
    if (name == name_end) die(in, start, "a __shared__ declaration without a name");
    put(out, start, name);
    fputs("(&", out);
    put(out, name, name_end);
    fputs(")", out);
    put(out, name_end, cut[d]);
    fprintf(out, " = ::tsim::shared_var<std::remove_reference_t<decltype(");
    put(out, name, name_end);
    fprintf(out, ")>>(tsim_sk%d + %d)", key, d);
    if (d < n) fputc(',', out);
    start = cut[d] + 1;
  }
}

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
  int shared_keys = 0;
  for (size_t i = 0; i < len;) {
    size_t j = skip_literal(i);
    if (j != i) { i = j; continue; }
    if (!strncmp(src + i, "__shared__", 10) && (i == 0 || !is_ident(src[i - 1])) && !is_ident(src[i + 10])) {
      size_t k = i;
      while (k > 0 && (src[k - 1] == ' ' || src[k - 1] == '\t')) k--;
      if (k >= 6 && !strncmp(src + k - 6, "extern", 6))
        die(argv[1], i, "extern __shared__ (dynamic shared memory) is not simulated yet");
      size_t semi = statement_end(i + 10);
      if (semi >= len) die(argv[1], i, "a __shared__ declaration without ';'");
      put(out, done, i);
      rewrite_shared(out, argv[1], i + 10, semi, &shared_keys);
      done = i = semi; /* the ';' is written with what follows */
      continue;
    }
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
