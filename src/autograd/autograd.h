/* Reverse-mode autograd in C (DESIGN.md, "Autograd").
 *
 * An op that runs while grad mode is on and has an input that requires grad
 * leaves a node: its backward function, edges to where its inputs' gradients
 * go (the input's own node, or the input itself when it is a leaf), the
 * tensors the formula needs, and the op's parameters. backward() walks the
 * nodes reachable from the root in reverse creation order, which is a
 * topological order because a node's inputs always exist before it.
 *
 * Backward formulas are written with op-layer calls, so every backend that
 * implements the forward ops gets the backward too. They run with grad mode
 * off (no graph of the backward). */
#ifndef TENSH_AUTOGRAD_H
#define TENSH_AUTOGRAD_H

#include "core/tensh.h"

typedef struct ts_node ts_node;

/* grads[k] receives the gradient for input k (a new reference), or stays
 * NULL when input k needs none. */
typedef ts_status (*ts_backward_fn)(ts_node *n, ts_tensor *grad, ts_tensor **grads);

typedef struct ts_edge {
  ts_node *fn;       /* the input's node (retained), or NULL */
  ts_tensor *leaf;   /* the input when it is a leaf that requires grad (retained), or NULL */
  int ndim;          /* the input's shape and dtype: gradients are summed and cast back to them */
  int64_t sizes[TS_MAX_DIMS];
  ts_dtype dtype;
  ts_device device;  /* gradients are moved back to it (a tensor moved across devices) */
} ts_edge;

#define TS_NODE_MAX_SAVED 6

/* The outputs of one op that returns several (split, chunk, unbind): each
 * output keeps a node of its own (its grad_fn, its tensor hooks), and the
 * first of them the engine reaches gathers every member's gradient and runs
 * the op's backward once (PyTorch's SplitBackward0 is one node with several
 * outputs; one cat instead of a zero-filled slice per piece plus the adds).
 * Every member's gradient is complete by then: the members are recorded one
 * after another, so nothing that feeds one of them runs after the first. */
typedef struct ts_ag_group {
  int refcount;       /* one per member node */
  int n;
  ts_node **members;  /* not retained: a member clears its slot when freed */
  int64_t *lens;      /* each member's length along the op's dim */
  ts_tensor **grads;  /* during the shared backward: each member's gradient, or NULL */
} ts_ag_group;

struct ts_node {
  int refcount;
  const char *name;          /* "MulBackward0", as torch names them */
  ts_backward_fn backward;
  uint64_t seq;              /* creation order */
  int nin;
  ts_edge *next;             /* nin edges */
  ts_tensor *saved[TS_NODE_MAX_SAVED];
  uint32_t saved_version[TS_NODE_MAX_SAVED];
  const char *saved_from[TS_NODE_MAX_SAVED]; /* the saved tensor's grad_fn name when saved (NULL: a leaf) */
  uint8_t saved_output;      /* bit k: saved tensor k is this node's own output */
  bool released;             /* saved tensors freed by a backward without retain_graph */
  bool view;                 /* the output is a view of input 0 (view ops, AsStridedBackward0) */
  ts_node *inner;            /* CopySlices: the in-place op's node, run on the view's part of the gradient */
  uint64_t hook_key;         /* nonzero: Tensor.register_hook functions see the gradient arriving here */
  int64_t i[6];              /* op parameters */
  double f[4];
  int64_t *list;             /* a variable-length parameter (cat sizes, reduced dims), owned */
  int nlist;
  ts_tensor *pending;        /* the gradient gathered so far during a backward */
  ts_ag_group *group;        /* an output of an op with several (see ts_ag_group), or NULL */
  int group_index;           /* which output */
};

/* grad mode: on by default; thread-local */
bool ts_grad_enabled(void);
void ts_set_grad_enabled(bool on);

/* True when grad mode is on and one of the n tensors requires grad. */
bool ts_ag_needed(int n, ts_tensor *const *ts);

/* Creates a node for an op whose inputs are ts[0..n) and makes it out's
 * grad_fn. Inputs that do not require grad get an empty edge. Returns the
 * node (owned by out) through *node for the caller to save tensors and
 * parameters, or NULL with an error. out == ts[0] records an in-place op:
 * edge 0 is out's history before it, and out takes the node as
 * ts_ag_inplace_history says. */
ts_status ts_ag_record(const char *name, ts_backward_fn fn, int n, ts_tensor *const *ts, ts_tensor *out,
                       ts_node **node);
/* Saves t (retained) in slot k of n, remembering its version to detect in-place changes. */
void ts_ag_save(ts_node *n, int k, ts_tensor *t);
/* The saved tensor k, or an error if it was freed or modified in place since. */
ts_status ts_ag_saved(ts_node *n, int k, ts_tensor **t);

/* A group for the n nodes that will join it (ts_ag_group_join); lens copied. */
ts_ag_group *ts_ag_group_new(int n, const int64_t *lens);
/* node becomes output k of g (which it references from then on). */
void ts_ag_group_join(ts_ag_group *g, ts_node *node, int k);
/* Drops the creator's reference (the members keep theirs). */
void ts_ag_group_release(ts_ag_group *g);

void ts_node_retain(ts_node *n);
void ts_node_release(ts_node *n);

/* Post-accumulate-grad hooks (PyTorch's Tensor.register_post_accumulate_grad_hook):
 * during a backward, once a leaf marked with ts_ag_set_hooked has received every
 * contribution to its gradient (the last edge into it from the nodes this
 * backward visits), the engine calls this with the leaf, its .grad complete.
 * DistributedDataParallel starts a bucket's all-reduce from it while the
 * rest of the backward runs. Set by the binding; an error stops the backward.
 * Not called by autograd.grad, which leaves .grad alone. */
extern ts_status (*ts_ag_post_accumulate_hook)(ts_tensor *leaf);
/* Marks t as a leaf with hooks (on) or not; the caller keeps t alive while marked. */
ts_status ts_ag_set_hooked(ts_tensor *t, bool on);

/* root.backward(grad): grad NULL means ones for a one-element root. */
ts_status ts_backward(ts_tensor *root, ts_tensor *grad, bool retain_graph);
/* torch.autograd.grad: gradients of the roots w.r.t. the inputs, without
 * touching .grad. grads[k] is NULL for an input the roots do not depend on
 * (an error unless allow_unused). */
ts_status ts_autograd_grad(int nroots, ts_tensor *const *roots, ts_tensor *const *root_grads, int ninputs,
                           ts_tensor *const *inputs, bool retain_graph, bool allow_unused, ts_tensor **grads);

/* g summed over broadcast dims and cast to the edge's shape and dtype. */
ts_status ts_ag_reduce_to(ts_tensor *g, const ts_edge *e, ts_tensor **out);

/* ---- in-place ops (autograd_inplace.c) ----
 * An in-place op on x records a node whose input 0 is x before the op and
 * makes it x's history. When x is a view (x->base), the history that changes
 * is the base's, as PyTorch does it: the base's grad_fn becomes CopySlices
 * (the base's gradient with the view's part run through the op's node) and
 * x's becomes AsStridedBackward0 of the base. Every other view of that base
 * picks the new history up on its next use (ts_ag_refresh). The storage's
 * version, bumped once per in-place op, lets saved tensors notice changes. */

/* Refuses in-place changes autograd cannot follow, with PyTorch's messages:
 * a leaf that requires grad, a view of one (outside no_grad); fn names the op. */
ts_status ts_ag_check_inplace(const char *fn, ts_tensor *x);
/* x takes the in-place op's node n (a reference handed over) as its history. */
ts_status ts_ag_inplace_history(ts_tensor *x, ts_node *n);
/* x gets the history of r (a new out-of-place result whose values were
 * copied into x; r's input 0 was x's value before the op). */
ts_status ts_ag_rebase(ts_tensor *x, ts_tensor *r);
/* v (just made as a view of t) remembers its base, in grad mode. */
void ts_ag_note_view(ts_tensor *t, ts_tensor *v);
/* A view whose base took a new history since the view's was recorded takes
 * the base's through AsStridedBackward0. Cheap for non-views; called where
 * a history is read (recording, backward roots, grad_fn, requires_grad). */
void ts_ag_refresh(ts_tensor *t);
/* v, just made by as_strided over x's storage, takes AsStridedBackward0 of x */
ts_status ts_ag_as_strided(ts_tensor *x, ts_tensor *v);
/* CopySlices' and AsStridedBackward0's formulas */
ts_status ts_copy_slices_backward(ts_node *n, ts_tensor *grad, ts_tensor **grads);
ts_status ts_as_strided_backward(ts_node *n, ts_tensor *grad, ts_tensor **grads);

/* ---- tensor hooks (PyTorch's Tensor.register_hook) ----
 * The binding chooses a key for a tensor's hooks and attaches it where the
 * tensor's gradient arrives: the node of a non-leaf (where it stays when an
 * in-place op later gives the tensor a new node, as in PyTorch), the leaf
 * itself. During a backward the engine calls ts_ag_tensor_hook(key, &grad)
 * with the whole gradient (every contribution summed) before the node's
 * backward runs or the leaf's .grad grows; the hook may replace *grad (a
 * reference it hands over). autograd.grad runs the hooks of nodes, not of
 * leaves, as PyTorch does. */
extern ts_status (*ts_ag_tensor_hook)(uint64_t key, ts_tensor **grad);
/* t's key (0: none yet) */
uint64_t ts_ag_hook_key(ts_tensor *t);
/* Attaches key to t (0 takes a leaf's off; the caller keeps a hooked leaf alive). */
ts_status ts_ag_set_hook_key(ts_tensor *t, uint64_t key);
/* Keys of nodes freed since the last call, whose hooks can never run again
 * (the binding forgets them); returns how many were written (at most max). */
int ts_ag_take_dead_hook_keys(uint64_t *keys, int max);

/* Scoped grad mode for op-layer functions that compose other recorded ops
 * but record one node themselves. */
#define TS_AG_OFF(prev) bool prev = ts_grad_enabled(); ts_set_grad_enabled(false)
#define TS_AG_RESTORE(prev) ts_set_grad_enabled(prev)

#endif
