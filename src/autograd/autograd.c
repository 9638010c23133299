/* The autograd engine: nodes, saved tensors, grad mode, backward() and
 * autograd.grad(). The formulas live in grad_*.c. */
#include "autograd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autocast.h"
#include "ops/ops.h"
#include "core/profiler.h"

static _Thread_local bool grad_off;
static uint64_t next_seq = 1;

bool ts_grad_enabled(void) { return !grad_off; }
void ts_set_grad_enabled(bool on) { grad_off = !on; }

bool ts_ag_needed(int n, ts_tensor *const *ts) {
  if (grad_off) return false;
  for (int i = 0; i < n; i++) {
    if (!ts[i]) continue;
    if (ts[i]->base) ts_ag_refresh(ts[i]);
    if (ts[i]->requires_grad) return true;
  }
  return false;
}

void ts_node_retain(ts_node *n) { n->refcount++; }

ts_ag_group *ts_ag_group_new(int n, const int64_t *lens) {
  ts_ag_group *g = calloc(1, sizeof *g);
  if (g) {
    g->members = calloc((size_t)(n > 0 ? n : 1), sizeof *g->members);
    g->grads = calloc((size_t)(n > 0 ? n : 1), sizeof *g->grads);
    g->lens = malloc(sizeof *g->lens * (size_t)(n > 0 ? n : 1));
  }
  if (!g || !g->members || !g->grads || !g->lens) {
    if (g) free(g->members), free(g->grads), free(g->lens);
    free(g);
    return ts_fail(TS_ERR_OOM, "out of memory recording a split"), NULL;
  }
  g->refcount = 1;
  g->n = n;
  memcpy(g->lens, lens, sizeof *g->lens * (size_t)n);
  return g;
}

void ts_ag_group_join(ts_ag_group *g, ts_node *node, int k) {
  g->refcount++;
  g->members[k] = node;
  node->group = g;
  node->group_index = k;
}

void ts_ag_group_release(ts_ag_group *g) {
  if (!g || --g->refcount > 0) return;
  free(g->members);
  free(g->grads);
  free(g->lens);
  free(g);
}

static void release_saved(ts_node *n) {
  for (int k = 0; k < TS_NODE_MAX_SAVED; k++) {
    ts_tensor_release(n->saved[k]);
    n->saved[k] = NULL;
  }
  if (n->inner) { /* CopySlices runs its in-place op's formula: freed with it */
    release_saved(n->inner);
    n->inner->released = true;
  }
}

/* Keys of freed nodes that had tensor hooks (ts_ag_take_dead_hook_keys). */
static uint64_t *dead_keys;
static int ndead_keys, cap_dead_keys;

static void hook_key_dead(uint64_t key) {
  if (ndead_keys == cap_dead_keys) {
    int cap = cap_dead_keys ? 2 * cap_dead_keys : 64;
    uint64_t *v = realloc(dead_keys, sizeof *v * (size_t)cap);
    if (!v) return; /* the binding keeps a few dead functions: harmless */
    dead_keys = v, cap_dead_keys = cap;
  }
  dead_keys[ndead_keys++] = key;
}

int ts_ag_take_dead_hook_keys(uint64_t *keys, int max) {
  int n = ndead_keys < max ? ndead_keys : max;
  if (n > 0) memcpy(keys, dead_keys + ndead_keys - n, sizeof *keys * (size_t)n); /* (dead_keys is NULL until one dies) */
  ndead_keys -= n;
  return n;
}

void ts_node_release(ts_node *n) {
  /* iterative over the chain of single owners: a long graph (an RNN over
   * thousands of steps) must not overflow the C stack */
  while (n && --n->refcount == 0) {
    ts_node *next_to_free = NULL;
    release_saved(n);
    ts_tensor_release(n->pending);
    if (n->inner) ts_node_release(n->inner);
    if (n->hook_key) hook_key_dead(n->hook_key);
    if (n->group) {
      n->group->members[n->group_index] = NULL;
      ts_ag_group_release(n->group);
    }
    for (int k = 0; k < n->nin; k++) {
      ts_tensor_release(n->next[k].leaf);
      if (n->next[k].fn) {
        if (!next_to_free) next_to_free = n->next[k].fn;
        else ts_node_release(n->next[k].fn);
      }
    }
    free(n->next);
    free(n->list);
    free(n);
    n = next_to_free;
  }
}

ts_status ts_ag_record(const char *name, ts_backward_fn fn, int n, ts_tensor *const *ts, ts_tensor *out,
                       ts_node **node) {
  ts_node *nd = calloc(1, sizeof *nd);
  ts_edge *edges = calloc((size_t)(n > 0 ? n : 1), sizeof *edges);
  if (!nd || !edges) {
    free(nd);
    free(edges);
    return ts_fail(TS_ERR_OOM, "out of memory recording %s", name);
  }
  nd->refcount = 1;
  nd->name = name;
  nd->backward = fn;
  nd->seq = next_seq++;
  nd->nin = n;
  nd->next = edges;
  for (int k = 0; k < n; k++) {
    ts_tensor *t = ts[k];
    if (!t) continue;
    if (t->base) ts_ag_refresh(t);
    ts_edge *e = &edges[k];
    e->ndim = t->ndim;
    memcpy(e->sizes, t->sizes, sizeof e->sizes);
    e->dtype = t->dtype;
    e->device = t->device;
    if (!t->requires_grad) continue;
    if (t->grad_fn) {
      e->fn = t->grad_fn;
      ts_node_retain(e->fn);
    } else {
      e->leaf = t;
      ts_tensor_retain(t);
    }
  }
  if (node) *node = nd;
  if (n > 0 && out == ts[0]) return ts_ag_inplace_history(out, nd); /* an in-place op */
  if (out->grad_fn) ts_node_release(out->grad_fn);
  out->grad_fn = nd;
  out->requires_grad = true;
  return TS_OK;
}

/* Saved tensors are aliases: the same storage and geometry, no history.
 * Saving the node's own output directly would make a reference cycle
 * (output -> node -> output). */
void ts_ag_save(ts_node *n, int k, ts_tensor *t) {
  ts_tensor *alias = NULL;
  if (t->is_wrapped_number) { /* a Lua number lives on the C stack of the op: keep a copy */
    if (ts_clone(t, &alias) != TS_OK) return;
  } else if (ts_tensor_view_of(t, t->ndim, t->sizes, t->strides, t->offset, &alias) != TS_OK) {
    return;
  }
  ts_tensor_release(n->saved[k]);
  n->saved[k] = alias;
  n->saved_version[k] = alias->storage->version;
  n->saved_from[k] = t->grad_fn ? t->grad_fn->name : NULL;
  if (t->grad_fn == n) n->saved_output |= (uint8_t)(1u << k);
  else n->saved_output &= (uint8_t)~(1u << k);
}

/* "torch.FloatTensor [2, 3]", as PyTorch names a tensor in its in-place error */
static void torch_type_str(const ts_tensor *t, char *buf, size_t n) {
  static const char *const names[TS_DTYPE_COUNT] = {
      [TS_FLOAT32] = "Float", [TS_FLOAT64] = "Double", [TS_FLOAT16] = "Half", [TS_BFLOAT16] = "BFloat16",
      [TS_INT64] = "Long",    [TS_INT32] = "Int",      [TS_UINT8] = "Byte",   [TS_BOOL] = "Bool",
      [TS_INT8] = "Char",     [TS_INT16] = "Short"};
  size_t k = (size_t)snprintf(buf, n, "torch.%s%sTensor [", t->device.type == TS_CUDA ? "cuda." : "", names[t->dtype]);
  for (int d = 0; d < t->ndim && k < n; d++)
    k += (size_t)snprintf(buf + k, n - k, d ? ", %lld" : "%lld", (long long)t->sizes[d]);
  if (k < n) snprintf(buf + k, n - k, "]");
}

ts_status ts_ag_saved(ts_node *n, int k, ts_tensor **t) {
  if (n->released)
    return ts_fail(TS_ERR_ARG, "trying to backward through the graph a second time (%s's saved tensors were freed "
                   "after the first backward); call backward({retain_graph = true}) the first time", n->name);
  ts_tensor *s = n->saved[k];
  if (!s) return ts_fail(TS_ERR_ARG, "%s: saved tensor %d is missing (out of memory when it was saved?)", n->name, k);
  if (s->storage->version != n->saved_version[k]) {
    char type[300], from[200] = "";
    torch_type_str(s, type, sizeof type);
    /* named by its history now, as PyTorch: the in-place op's node when one was recorded since
     * (a node's own output is named by the node) */
    bool output = n->saved_output >> k & 1;
    const char *fn = !output && s->storage->inplace_fn && s->storage->inplace_version > n->saved_version[k]
                         ? s->storage->inplace_fn : n->saved_from[k];
    if (fn) snprintf(from, sizeof from, ", which is output 0 of %s", fn);
    return ts_fail(TS_ERR_ARG, "one of the variables needed for gradient computation has been modified by an "
                   "inplace operation: [%s]%s, is at version %u; expected version %u instead. Hint: %s saved it "
                   "for its gradient; use an out-of-place op, or clone() the tensor before changing it in place",
                   type, from, s->storage->version, n->saved_version[k], n->name);
  }
  *t = s;
  return TS_OK;
}

ts_status ts_ag_reduce_to(ts_tensor *g, const ts_edge *e, ts_tensor **out) {
  ts_tensor *cur = g;
  ts_tensor_retain(cur);
  ts_status st = TS_OK;
  bool same = g->ndim == e->ndim && memcmp(g->sizes, e->sizes, sizeof(int64_t) * (size_t)e->ndim) == 0;
  if (!same) {
    /* sum the leading dims broadcasting added, and the dims that were 1 */
    int64_t dims[TS_MAX_DIMS];
    int nd = 0, lead = g->ndim - e->ndim;
    for (int d = 0; d < g->ndim; d++)
      if (d < lead || (e->sizes[d - lead] == 1 && g->sizes[d] != 1)) dims[nd++] = d;
    ts_tensor *s = NULL, *r = NULL;
    if (nd > 0) st = ts_sum(cur, nd, dims, true, &s);
    else ts_tensor_retain(s = cur);
    if (!st) st = ts_reshape(s, e->ndim, e->sizes, &r);
    ts_tensor_release(s);
    ts_tensor_release(cur);
    if (st) return st;
    cur = r;
  }
  if (!ts_device_eq(cur->device, e->device)) {
    ts_tensor *c = NULL;
    st = ts_to_device(cur, e->device, cur->dtype, false, &c);
    ts_tensor_release(cur);
    if (st) return st;
    cur = c;
  }
  if (cur->dtype != e->dtype && ts_dtype_is_float(e->dtype)) {
    ts_tensor *c = NULL;
    st = ts_to_dtype(cur, e->dtype, &c);
    ts_tensor_release(cur);
    if (st) return st;
    cur = c;
  }
  *out = cur;
  return TS_OK;
}

/* ---- the engine -------------------------------------------------------- */

typedef struct capture {
  int n;
  ts_tensor *const *inputs;
  ts_tensor **grads;
} capture;

typedef struct node_list {
  ts_node **v;
  int n, cap;
} node_list;

static ts_status list_push(node_list *l, ts_node *n) {
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 64;
    ts_node **v = realloc(l->v, sizeof *v * (size_t)cap);
    if (!v) return ts_fail(TS_ERR_OOM, "backward: out of memory walking the graph");
    l->v = v, l->cap = cap;
  }
  l->v[l->n++] = n;
  return TS_OK;
}

static bool listed(const node_list *l, const ts_node *n) {
  for (int i = 0; i < l->n; i++)
    if (l->v[i] == n) return true;
  return false;
}

/* Every node reachable from the roots, found with an explicit stack. */
static ts_status collect(node_list *all, int nroots, ts_tensor *const *roots) {
  node_list stack = {0};
  ts_status st = TS_OK;
  for (int r = 0; r < nroots && !st; r++)
    if (roots[r]->grad_fn && !listed(all, roots[r]->grad_fn)) {
      st = list_push(all, roots[r]->grad_fn);
      if (!st) st = list_push(&stack, roots[r]->grad_fn);
    }
  while (!st && stack.n > 0) {
    ts_node *n = stack.v[--stack.n];
    for (int k = 0; k < n->nin && !st; k++) {
      ts_node *m = n->next[k].fn;
      if (m && !listed(all, m)) {
        st = list_push(all, m);
        if (!st) st = list_push(&stack, m);
      }
    }
  }
  free(stack.v);
  return st;
}

static int by_seq_desc(const void *a, const void *b) {
  uint64_t x = (*(ts_node *const *)a)->seq, y = (*(ts_node *const *)b)->seq;
  return (x < y) - (x > y);
}

/* True when nothing but the caller's one reference can read or write t's
 * bytes: no other reference to the tensor, no other tensor (view, saved
 * alias) on its storage, memory owned, dense. Such a gradient can be adopted
 * as a .grad or summed into in place (PyTorch's AccumulateGrad steals a
 * gradient whose use count says nobody else holds it). */
static bool exclusive(const ts_tensor *t) {
  return t->refcount == 1 && t->storage->refcount == 1 && t->storage->allocator && !t->is_wrapped_number &&
         ts_is_contiguous(t);
}

static bool same_geometry(const ts_tensor *a, const ts_tensor *b) {
  return a->dtype == b->dtype && ts_device_eq(a->device, b->device) && a->ndim == b->ndim &&
         memcmp(a->sizes, b->sizes, sizeof(int64_t) * (size_t)a->ndim) == 0;
}

/* *acc += g (taking over g's reference): into *acc's memory when in_place
 * allows it and the shapes agree, else into a new tensor */
static ts_status accumulate_into(ts_tensor **acc, ts_tensor *g, bool in_place) {
  if (!*acc) {
    *acc = g;
    return TS_OK;
  }
  ts_status st;
  if (in_place && same_geometry(*acc, g) && ts_is_contiguous(*acc)) {
    st = ts_binary_out(TS_OP_ADD, *acc, g, *acc);
    ts_tensor_release(g);
    return st;
  }
  ts_tensor *sum = NULL;
  st = ts_binary(TS_OP_ADD, *acc, g, &sum);
  ts_tensor_release(g);
  if (st) return st;
  ts_tensor_release(*acc);
  *acc = sum;
  return TS_OK;
}

/* a gradient the engine alone holds (pending at a node, captured for
 * autograd.grad): summed in place when nothing else can see it */
static ts_status accumulate(ts_tensor **acc, ts_tensor *g) {
  return accumulate_into(acc, g, *acc && exclusive(*acc));
}

static int capture_index(const capture *cap, const ts_tensor *t) {
  if (!cap) return -1;
  for (int i = 0; i < cap->n; i++)
    if (cap->inputs[i] == t) return i;
  return -1;
}

/* A gradient arriving at a leaf: into .grad, or into the capture. A leaf
 * without .grad adopts g when nothing else holds it (the engine drops its own
 * references first) and gets a copy otherwise: two .grad fields, or a .grad
 * and a tensor the user passed to backward, never share memory. An existing
 * .grad is summed into in place, as PyTorch does under no_grad (the
 * optimizer and the user see the same tensor grow). */
static ts_status deliver_leaf(ts_tensor *leaf, ts_tensor *g, capture *cap) {
  int ci = capture_index(cap, leaf);
  if (cap) {
    if (ci < 0) return ts_tensor_release(g), TS_OK;
    return accumulate(&cap->grads[ci], g);
  }
  if (!leaf->grad && !exclusive(g)) {
    ts_tensor *c = NULL;
    ts_status st = ts_clone(g, &c);
    ts_tensor_release(g);
    if (st) return st;
    g = c;
  }
  return accumulate_into(&leaf->grad, g, true);
}

/* ---- hooks on leaves: post-accumulate-grad hooks and tensor hooks ---- */

ts_status (*ts_ag_post_accumulate_hook)(ts_tensor *leaf);
ts_status (*ts_ag_tensor_hook)(uint64_t key, ts_tensor **grad);

/* The leaves with hooks: a short list (DistributedDataParallel's
 * parameters, tensors given register_hook), kept here rather than as tensor
 * fields so ts_tensor stays as it is; a backward without hooked leaves pays
 * one test. */
typedef struct hooked_leaf {
  ts_tensor *t;
  bool post;    /* post-accumulate-grad hooks */
  uint64_t key; /* tensor hooks (0: none) */
} hooked_leaf;
static hooked_leaf *hooked_set;
static int nhooked_set, cap_hooked_set;

static hooked_leaf *hooked_entry(const ts_tensor *t) {
  for (int i = 0; i < nhooked_set; i++)
    if (hooked_set[i].t == t) return &hooked_set[i];
  return NULL;
}

/* t's entry, made when missing (NULL with an error when out of memory) */
static hooked_leaf *hooked_add(ts_tensor *t, const char *fn) {
  hooked_leaf *h = hooked_entry(t);
  if (h) return h;
  if (nhooked_set == cap_hooked_set) {
    int cap = cap_hooked_set ? 2 * cap_hooked_set : 64;
    hooked_leaf *v = realloc(hooked_set, sizeof *v * (size_t)cap);
    if (!v) return ts_fail(TS_ERR_OOM, "%s: out of memory", fn), NULL;
    hooked_set = v, cap_hooked_set = cap;
  }
  hooked_set[nhooked_set] = (hooked_leaf){t, false, 0};
  return &hooked_set[nhooked_set++];
}

static void hooked_drop_if_empty(hooked_leaf *h) {
  if (!h->post && !h->key) *h = hooked_set[--nhooked_set];
}

ts_status ts_ag_set_hooked(ts_tensor *t, bool on) {
  hooked_leaf *h = on ? hooked_add(t, "register_post_accumulate_grad_hook") : hooked_entry(t);
  if (on && !h) return TS_ERR_OOM;
  if (h) {
    h->post = on;
    hooked_drop_if_empty(h);
  }
  return TS_OK;
}

uint64_t ts_ag_hook_key(ts_tensor *t) {
  if (t->base) ts_ag_refresh(t);
  if (t->grad_fn) return t->grad_fn->hook_key;
  hooked_leaf *h = hooked_entry(t);
  return h ? h->key : 0;
}

ts_status ts_ag_set_hook_key(ts_tensor *t, uint64_t key) {
  if (t->base) ts_ag_refresh(t);
  if (t->grad_fn) {
    t->grad_fn->hook_key = key;
    return TS_OK;
  }
  hooked_leaf *h = key ? hooked_add(t, "register_hook") : hooked_entry(t);
  if (key && !h) return TS_ERR_OOM;
  if (h) {
    h->key = key;
    hooked_drop_if_empty(h);
  }
  return TS_OK;
}

/* A hooked leaf this backward reaches: its gradient waits in `pending` until
 * every edge into it has delivered, for the tensor hooks to see the sum. */
typedef struct hooked {
  ts_tensor *leaf;
  bool post;
  uint64_t key;
  int remaining;      /* edges into it from nodes not yet run */
  bool got;           /* a gradient arrived in this backward */
  ts_tensor *pending; /* tensor hooks: the gradient summed so far */
} hooked;

typedef struct hook_list {
  hooked *v;
  int n, cap;
} hook_list;

static hooked *find_hooked(hook_list *h, const ts_tensor *leaf) {
  for (int i = 0; i < h->n; i++)
    if (h->v[i].leaf == leaf) return &h->v[i];
  return NULL;
}

/* the hooked leaves the nodes reach, each with its number of incoming edges */
static ts_status count_hooked(hook_list *h, const node_list *all) {
  for (int i = 0; i < all->n; i++)
    for (int k = 0; k < all->v[i]->nin; k++) {
      ts_tensor *leaf = all->v[i]->next[k].leaf;
      hooked_leaf *e = leaf ? hooked_entry(leaf) : NULL;
      if (!e) continue;
      bool post = e->post && ts_ag_post_accumulate_hook, pre = e->key && ts_ag_tensor_hook;
      if (!post && !pre) continue;
      hooked *x = find_hooked(h, leaf);
      if (!x) {
        if (h->n == h->cap) {
          int cap = h->cap ? 2 * h->cap : 16;
          hooked *v = realloc(h->v, sizeof *v * (size_t)cap);
          if (!v) return ts_fail(TS_ERR_OOM, "backward: out of memory listing hooked tensors");
          h->v = v, h->cap = cap;
        }
        x = &h->v[h->n++];
        *x = (hooked){leaf, post, pre ? e->key : 0, 0, false, NULL};
      }
      x->remaining++;
    }
  return TS_OK;
}

/* The tensor hooks of key on *g; a hook's result replaces it. */
static ts_status run_tensor_hooks(uint64_t key, ts_tensor **g) {
  if (!key || !ts_ag_tensor_hook) return TS_OK;
  return ts_ag_tensor_hook(key, g);
}

/* node n has delivered what it had: a hooked leaf that has now heard from
 * every node that could reach it gets its gradient (through its tensor
 * hooks), then runs its post-accumulate hooks */
static ts_status edges_done(hook_list *h, ts_node *n) {
  for (int k = 0; k < n->nin; k++) {
    ts_tensor *leaf = n->next[k].leaf;
    hooked *x = leaf ? find_hooked(h, leaf) : NULL;
    if (!x || --x->remaining != 0) continue;
    ts_status st = TS_OK;
    if (x->pending) {
      ts_tensor *g = x->pending;
      x->pending = NULL;
      st = run_tensor_hooks(x->key, &g);
      st = st ? (ts_tensor_release(g), st) : deliver_leaf(leaf, g, NULL);
    }
    if (!st && x->got && x->post) st = ts_ag_post_accumulate_hook(leaf);
    if (st) return st;
  }
  return TS_OK;
}

/* A seed given straight to a leaf root (x:backward() on a leaf). */
static ts_status seed_leaf(ts_tensor *root, ts_tensor *seed) {
  hooked_leaf *e = hooked_entry(root);
  ts_status st = e ? run_tensor_hooks(e->key, &seed) : TS_OK;
  if (st) return ts_tensor_release(seed), st;
  return deliver_leaf(root, seed, NULL);
}

/* n's gathered gradient (NULL when none arrived), taken for its backward:
 * captured first when n is a captured input's node (autograd.grad, before the
 * tensor's hooks run, as PyTorch's engine does), then through n's hooks */
static ts_status take_pending(ts_node *n, capture *cap, ts_tensor **out) {
  ts_tensor *g = n->pending;
  *out = NULL;
  if (!g) return TS_OK;
  n->pending = NULL;
  ts_status st = ts_check_interrupt();
  if (cap)
    for (int c = 0; c < cap->n && !st; c++)
      if (cap->inputs[c]->grad_fn == n && capture_index(cap, cap->inputs[c]) == c) {
        ts_tensor_retain(g);
        st = accumulate(&cap->grads[c], g);
      }
  if (!st && n->released)
    st = ts_fail(TS_ERR_ARG, "trying to backward through the graph a second time (%s's saved tensors were freed "
                 "after the first backward); call backward({retain_graph = true}) the first time", n->name);
  if (!st && n->hook_key) st = run_tensor_hooks(n->hook_key, &g);
  if (st) {
    ts_tensor_release(g);
    return st;
  }
  *out = g;
  return TS_OK;
}

/* n, the first member of its group to run: every member's gradient (n's own
 * is g, handed over) into the group's slots for the shared backward */
static ts_status gather_group(ts_node *n, ts_tensor *g, capture *cap) {
  ts_ag_group *grp = n->group;
  grp->grads[n->group_index] = g;
  for (int k = 0; k < grp->n; k++) {
    ts_node *m = grp->members[k];
    if (!m || m == n) continue;
    ts_status st = take_pending(m, cap, &grp->grads[k]);
    if (st) return st;
  }
  return TS_OK;
}

static void drop_group_grads(ts_ag_group *grp) {
  for (int k = 0; k < grp->n; k++) {
    ts_tensor_release(grp->grads[k]);
    grp->grads[k] = NULL;
  }
}

static ts_status run_engine(int nroots, ts_tensor *const *roots, ts_tensor *const *root_grads, bool retain,
                            capture *cap) {
  bool prev = ts_grad_enabled();
  ts_set_grad_enabled(false);
  unsigned autocast = ts_autocast_suspend(); /* backward runs in the dtypes the forward chose */
  node_list all = {0};
  for (int r = 0; r < nroots; r++)
    if (roots[r]->base) ts_ag_refresh(roots[r]);
  ts_status st = collect(&all, nroots, roots);
  if (!st && all.n > 1) qsort(all.v, (size_t)all.n, sizeof *all.v, by_seq_desc); /* qsort(NULL, 0) is undefined */
  hook_list hooks = {0};
  if (!st && !cap && nhooked_set) st = count_hooked(&hooks, &all);
  /* seed the roots */
  for (int r = 0; r < nroots && !st; r++) {
    ts_tensor *root = roots[r], *g = root_grads ? root_grads[r] : NULL, *seed = NULL;
    if (g) {
      if (g->ndim != root->ndim || memcmp(g->sizes, root->sizes, sizeof(int64_t) * (size_t)g->ndim) != 0) {
        char a[256], b[256];
        ts_shape_str(g->ndim, g->sizes, a, sizeof a);
        ts_shape_str(root->ndim, root->sizes, b, sizeof b);
        st = ts_fail(TS_ERR_SHAPE, "backward: gradient has shape %s but the tensor has shape %s", a, b);
        break;
      }
      ts_tensor_retain(seed = g);
    } else {
      st = ts_full(root->ndim, root->sizes, 1, root->dtype, root->device, &seed);
      if (st) break;
    }
    /* a root with history is captured when its node runs; a leaf root here */
    if (root->grad_fn) {
      st = accumulate(&root->grad_fn->pending, seed);
    } else if (cap) {
      int ci = capture_index(cap, root);
      if (ci >= 0) st = accumulate(&cap->grads[ci], seed);
      else ts_tensor_release(seed);
    } else {
      st = seed_leaf(root, seed);
    }
  }
  for (int i = 0; i < all.n && !st; i++) {
    ts_node *n = all.v[i];
    ts_tensor *g = NULL;
    if ((st = take_pending(n, cap, &g))) break;
    if (!g) {
      if (hooks.n) st = edges_done(&hooks, n);
      continue;
    }
    if (n->group && (st = gather_group(n, g, cap))) {
      drop_group_grads(n->group);
      break;
    }
    ts_tensor *stack_grads[8], **grads = n->nin <= 8 ? stack_grads : calloc((size_t)n->nin, sizeof *grads);
    if (!grads) {
      if (n->group) drop_group_grads(n->group); /* g among them */
      else ts_tensor_release(g);
      st = ts_fail(TS_ERR_OOM, "backward: out of memory");
      break;
    }
    memset(grads, 0, sizeof *grads * (size_t)n->nin);
    int ev = ts_dispatch_observed & TS_OBSERVE_PROFILE ? ts_prof_begin(n->name, TS_PROF_BACKWARD, g->device, 1, &g) : -1;
    if (!st) st = n->backward(n, g, grads);
    if (ev >= 0) ts_prof_end(ev);
    if (n->group) drop_group_grads(n->group); /* g among them */
    else ts_tensor_release(g);
    for (int k = 0; k < n->nin; k++) {
      ts_edge *e = &n->next[k];
      ts_tensor *gk = grads[k], *r = NULL;
      if (!gk) continue;
      if (!st && (e->fn || e->leaf)) st = ts_ag_reduce_to(gk, e, &r);
      ts_tensor_release(gk); /* before delivering: r's count then says whether anything else holds it */
      grads[k] = NULL;
      if (!r) continue;
      hooked *x = hooks.n && e->leaf ? find_hooked(&hooks, e->leaf) : NULL;
      if (x) x->got = true;
      if (e->fn) st = accumulate(&e->fn->pending, r);
      else if (x && x->key) st = accumulate(&x->pending, r); /* summed for the tensor hooks first */
      else st = deliver_leaf(e->leaf, r, cap);
    }
    if (grads != stack_grads) free(grads);
    if (!st && hooks.n) st = edges_done(&hooks, n);
  }
  for (int i = 0; i < all.n; i++) { /* on success nothing is pending; on error drop what is */
    ts_tensor_release(all.v[i]->pending);
    all.v[i]->pending = NULL;
    if (!retain && !st) {
      release_saved(all.v[i]);
      all.v[i]->released = true;
    }
  }
  for (int i = 0; i < hooks.n; i++) ts_tensor_release(hooks.v[i].pending);
  free(all.v);
  free(hooks.v);
  ts_autocast_resume(autocast);
  ts_set_grad_enabled(prev);
  return st;
}

static ts_status check_root(const char *fn, ts_tensor *root, ts_tensor *grad) {
  if (!root->requires_grad)
    return ts_fail(TS_ERR_ARG, "%s: the tensor does not require grad and has no grad_fn (create inputs with "
                   "{requires_grad = true}, and call it outside torch.no_grad())", fn);
  if (!grad && ts_numel(root) != 1) {
    char s[256];
    ts_shape_str(root->ndim, root->sizes, s, sizeof s);
    return ts_fail(TS_ERR_ARG, "%s: grad can be implicitly created only for one-element outputs, this one has shape "
                   "%s; pass a gradient of that shape, e.g. y:backward(torch.ones_like(y))", fn, s);
  }
  return TS_OK;
}

ts_status ts_backward(ts_tensor *root, ts_tensor *grad, bool retain_graph) {
  if (root->base) ts_ag_refresh(root);
  ts_status st = check_root("backward", root, grad);
  if (st) return st;
  ts_tensor *grads[1] = {grad};
  return run_engine(1, &root, grad ? grads : NULL, retain_graph, NULL);
}

ts_status ts_autograd_grad(int nroots, ts_tensor *const *roots, ts_tensor *const *root_grads, int ninputs,
                           ts_tensor *const *inputs, bool retain_graph, bool allow_unused, ts_tensor **grads) {
  for (int r = 0; r < nroots; r++) {
    if (roots[r]->base) ts_ag_refresh(roots[r]);
    ts_status st = check_root("autograd.grad", roots[r], root_grads ? root_grads[r] : NULL);
    if (st) return st;
  }
  for (int i = 0; i < ninputs; i++) {
    grads[i] = NULL;
    if (inputs[i]->base) ts_ag_refresh(inputs[i]);
    if (!inputs[i]->requires_grad)
      return ts_fail(TS_ERR_ARG, "autograd.grad: input %d does not require grad", i);
  }
  capture cap = {ninputs, inputs, grads};
  ts_status st = run_engine(nroots, roots, root_grads, retain_graph, &cap);
  for (int i = 0; i < ninputs && !st; i++)
    if (!grads[i] && !allow_unused)
      st = ts_fail(TS_ERR_ARG, "autograd.grad: input %d was not used to compute the outputs; pass "
                   "{allow_unused = true} to get nil for it", i);
  if (st)
    for (int i = 0; i < ninputs; i++) {
      ts_tensor_release(grads[i]);
      grads[i] = NULL;
    }
  return st;
}
