/* The op layer's reduce functions (included by ops.h). */
#ifndef TENSH_OP_REDUCE_H
#define TENSH_OP_REDUCE_H

#endif
