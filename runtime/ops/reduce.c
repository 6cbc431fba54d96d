#include "ops_common.h"

const qr_op_def qr_ops_reduce[] = {
    {0},
};
