/* The op layer's linalg functions (included by ops.h). */
#ifndef TENSH_OP_LINALG_H
#define TENSH_OP_LINALG_H

#endif
