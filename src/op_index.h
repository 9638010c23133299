/* The op layer's index functions (included by ops.h). */
#ifndef TENSH_OP_INDEX_H
#define TENSH_OP_INDEX_H

#endif
